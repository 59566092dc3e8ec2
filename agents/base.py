"""Shared pieces of the reference policies: a base class and the policy registry."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

from aryl_gym.sim.view import ClusterView, Decision, PlacementOptions


class BasePolicy:
    """Defaults for the :class:`~aryl_gym.sim.view.Policy` protocol.

    Subclasses set ``name`` and override :meth:`decide` (and :meth:`reclaim` if they choose the
    servers to return themselves; ``None`` means the simulator's default rule).
    """

    name: str = "base"
    uses_loaning: bool = False
    placement: PlacementOptions = PlacementOptions()
    event_driven: bool = True

    def reset(self, seed: int | None = None) -> None:
        return None

    def decide(self, view: ClusterView) -> Decision:  # pragma: no cover - abstract
        raise NotImplementedError

    def reclaim(self, view: ClusterView, n: int) -> Sequence[int] | None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


#: the entry-point group through which installed packages add policies
ENTRY_POINT_GROUP = "aryl_gym.policies"
#: the modules of this package that register the built-in policies (imported on first use)
BUILTIN_MODULES = ("fifo", "aryl", "afs", "pollux", "gandiva", "random_policy", "aryl_tuned")

_REGISTRY: dict[str, Callable[[], BasePolicy]] = {}
#: plugin entry points that failed to load: name -> why (reported when the name is asked for)
_BROKEN: dict[str, str] = {}
#: plugin entry points registered: name -> entry point value
_PLUGINS: dict[str, str] = {}
#: plugin entry points whose name is already taken (a built-in, or another plugin): name -> why;
#: asking for the name is then an error, never silently the other policy
_CONFLICTS: dict[str, str] = {}
_loaded = False


def register(name: str) -> Callable[[Callable[[], BasePolicy]], Callable[[], BasePolicy]]:
    """Register a zero-argument factory (or a policy class) under ``name``.

    This is the one way a policy is registered: the built-in modules decorate their factories
    with it, and :func:`load_plugins` calls it for each entry point of the ``aryl_gym.policies``
    group.
    """

    def deco(factory: Callable[[], BasePolicy]) -> Callable[[], BasePolicy]:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} registered twice")
        _REGISTRY[name] = factory
        return factory

    return deco


def load_plugins(force: bool = False) -> None:
    """Import the built-in policy modules and the installed plugins (once; ``force`` rescans).

    A plugin is a distribution with an entry point in the group ``aryl_gym.policies``::

        [project.entry-points."aryl_gym.policies"]
        mine = "my_package.policies:MinePolicy"   # a zero-argument factory or a class

    The entry point's name is the policy's registry name. A plugin whose entry point fails to
    load does not break the others: asking for it by name reports why.
    """
    global _loaded
    if _loaded and not force:
        return
    for mod in BUILTIN_MODULES:
        try:
            __import__(f"aryl_gym.agents.{mod}")
        except ModuleNotFoundError as exc:  # a policy module not yet present
            if exc.name != f"aryl_gym.agents.{mod}":
                raise

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY or ep.name in _CONFLICTS:
            if _PLUGINS.get(ep.name) == ep.value:
                continue  # this plugin, registered by an earlier scan
            owner = (f"the plugin entry point {_PLUGINS[ep.name]!r}" if ep.name in _PLUGINS
                     else "a built-in policy")
            _CONFLICTS[ep.name] = (
                f"the plugin entry point {ep.name} = {ep.value!r} uses the name of {owner}; "
                "rename the plugin's entry point (a plugin never replaces another policy)"
            )
            continue
        try:
            factory = ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a broken plugin must not hide the others
            # (a module calling sys.exit() at import used to end every command, even gym.make)
            _BROKEN[ep.name] = f"entry point {ep.value!r} failed to load: {type(exc).__name__}: {exc}"
            continue
        if not callable(factory):
            _BROKEN[ep.name] = f"entry point {ep.value!r} is not a factory or a class"
            continue
        _BROKEN.pop(ep.name, None)
        register(ep.name)(factory)
        _PLUGINS[ep.name] = ep.value
    _loaded = True


def policy_names() -> list[str]:
    load_plugins()
    return sorted(_REGISTRY)


def plugin_problems() -> dict[str, str]:
    """Installed plugin entry points that cannot be used: name -> why (broken or conflicting)."""
    load_plugins()
    return {**_BROKEN, **_CONFLICTS}


def make_policy(name: str) -> BasePolicy:
    """A fresh policy by registry name; unknown names list the known ones."""
    load_plugins()
    if name in _CONFLICTS:
        raise ValueError(f"policy {name!r} is ambiguous: {_CONFLICTS[name]}")
    if name not in _REGISTRY:
        if name in _BROKEN:
            raise ValueError(f"policy plugin {name!r} is installed but broken: {_BROKEN[name]}")
        raise ValueError(f"unknown policy {name!r}. Known policies: {', '.join(sorted(_REGISTRY))}")
    policy = _REGISTRY[name]()
    if not callable(getattr(policy, "decide", None)):
        raise ValueError(f"policy {name!r}: its factory returned {policy!r}, which has no decide(view)")
    return policy
