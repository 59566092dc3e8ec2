"""Shared pieces of the reference policies: a base class and the policy registry."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


_REGISTRY: dict[str, Callable[[], BasePolicy]] = {}


def register(name: str) -> Callable[[Callable[[], BasePolicy]], Callable[[], BasePolicy]]:
    """Register a zero-argument factory under ``name``."""

    def deco(factory: Callable[[], BasePolicy]) -> Callable[[], BasePolicy]:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} registered twice")
        _REGISTRY[name] = factory
        return factory

    return deco


def _load_all() -> None:
    # Importing the modules registers their policies.
    from aryl_gym.agents import fifo  # noqa: F401

    for mod in ("aryl", "afs", "pollux", "gandiva", "random_policy", "aryl_tuned"):
        try:
            __import__(f"aryl_gym.agents.{mod}")
        except ModuleNotFoundError as exc:  # a policy module not yet present
            if exc.name != f"aryl_gym.agents.{mod}":
                raise


def policy_names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def make_policy(name: str) -> BasePolicy:
    """A fresh policy by registry name; unknown names list the known ones."""
    _load_all()
    if name not in _REGISTRY:
        raise ValueError(f"unknown policy {name!r}. Known policies: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]()
