"""Minari datasets (``aryl-gym demos --format minari``, :mod:`aryl_gym.offline`; issue 35).

One tiny-scenario dataset of 2 episodes of ``aryl`` is written once per module; the tests read it
back with ``minari.load_dataset``, replay its actions in the recovered env (bit for bit), check
its metadata against native runs, and feed it to behaviour cloning.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

minari = pytest.importorskip("minari")

from aryl_gym import offline  # noqa: E402
from aryl_gym.cli import main as cli_main  # noqa: E402
from aryl_gym.config import ConfigError  # noqa: E402

DSID = "aryl_gym/tiny/aryl-v0"
SEED = 3  # episode seeds 3 and 4


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("minari")
    with offline.datasets_path(root):
        offline.write_dataset(DSID, "tiny", "aryl", episodes=2, seed=SEED, author="tests")
    return root


@pytest.fixture()
def in_store(store: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(store))
    return store


def test_dataset_ids() -> None:
    assert offline.default_dataset_id("testbed", "aryl") == "aryl_gym/testbed/aryl-v0"
    assert offline.default_dataset_id("configs/scenarios/basic.yaml", "aryl+tuned", 2) == \
        "aryl_gym/basic/aryl-tuned-v2"
    assert offline.check_dataset_id("me/testbed/sjf-v12") == "me/testbed/sjf-v12"
    for bad in ("aryl_gym/testbed/aryl", "bad id-v0", "a/b+c-v0", ""):
        with pytest.raises(ValueError, match="NAMESPACE/NAME-vN"):
            offline.check_dataset_id(bad)
    # the ids pass Minari's own parser
    from minari.dataset.minari_dataset import parse_dataset_id

    assert parse_dataset_id(offline.default_dataset_id("tiny", "aryl-preempt")) == ("aryl_gym/tiny", "aryl-preempt", 0)


def test_load_dataset_reads_episodes_with_masks_and_reward_components(in_store: Path) -> None:
    ds = minari.load_dataset(DSID)
    assert ds.total_episodes == 2
    eps = list(ds.iterate_episodes())
    assert ds.total_steps == sum(len(e.actions) for e in eps)
    for ep in eps:
        n = len(ep.actions)
        assert set(ep.observations) == {"action_mask", "cluster", "jobs", "outside"}
        assert all(len(v) == n + 1 for v in ep.observations.values())
        # every recorded action was allowed by the mask of the observation it was chosen on
        mask = ep.observations["action_mask"][:-1]
        assert np.all(mask[np.arange(n), ep.actions] == 1.0)
        assert ep.terminations[-1] or ep.truncations[-1]
        assert not (ep.terminations[:-1].any() or ep.truncations[:-1].any())
        # the default reward is the jct component: reward = its weighted value, reset info first
        assert len(ep.infos["reward_jct"]) == n + 1 and ep.infos["reward_jct"][0] == 0.0
        np.testing.assert_array_equal(ep.infos["reward_jct"][1:], ep.rewards)


def test_replaying_the_actions_gives_the_same_observations_and_rewards_bit_for_bit(in_store: Path) -> None:
    ds = minari.load_dataset(DSID)
    env = ds.recover_environment()
    metas = list(ds.storage.get_episode_metadata(range(ds.total_episodes)))
    for ep, meta in zip(ds.iterate_episodes(), metas):
        obs, info = env.reset(seed=meta["seed"], options=meta["options"])
        for k, v in obs.items():
            assert v.dtype == ep.observations[k].dtype and np.array_equal(v, ep.observations[k][0]), k
        for t, a in enumerate(ep.actions):
            obs, r, term, trunc, info = env.step(int(a))
            assert r == ep.rewards[t] and term == ep.terminations[t] and trunc == ep.truncations[t], t
            for k, v in obs.items():
                assert np.array_equal(v, ep.observations[k][t + 1]), (t, k)
            for c, x in info["reward_components"].items():
                assert ep.infos[f"reward_{c}"][t + 1] == x
            assert ep.infos["time"][t + 1] == info["time"]
        assert term or trunc
        # and the episode's figures are those of the run
        assert info["episode_metrics"]["avg_jct"] == meta["episode_metrics"]["avg_jct"]
    env.close()


def test_metadata_names_the_recording(in_store: Path) -> None:
    ds = minari.load_dataset(DSID)
    md = ds.storage.metadata
    assert md["author"] == {"tests"}
    assert md["algorithm_name"] == "aryl played through aryl_gym/Aryl-v2 (sequential actions, window 16)"
    spec = json.loads(md["env_spec"])
    assert spec["id"] == "aryl_gym/Aryl-v2"
    assert spec["kwargs"]["scenario"] == "tiny" and spec["kwargs"]["reclaim"] == "aryl"
    mine = md["aryl_gym"]
    assert mine["episode_seeds"] == [SEED, SEED + 1] and mine["world_version"] == "v2"
    assert mine["policy"] == "aryl" and mine["scenario"] == "tiny" and mine["code_commit"]
    assert mine["window"] == 16 and mine["action_mode"] == "sequential"
    metas = list(ds.storage.get_episode_metadata(range(2)))
    assert [m["seed"] for m in metas] == [SEED, SEED + 1]
    assert metas[0]["options"] == {"episode_seed": SEED}
    assert metas[0]["episode_metrics"]["jobs_total"] == 30


def test_with_every_job_in_the_window_the_dataset_is_the_native_run(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.train.evaluation import run_reference

    assert cli_main(["demos", "--format", "minari", "--scenario", "tiny", "--policy", "aryl", "--episodes", "1",
                     "--seed", "4", "--window", "64", "--minari-path", str(tmp_path), "--json"]) == 0
    dsid = json.loads(capsys.readouterr().out)["dataset_id"]
    with offline.datasets_path(tmp_path):
        meta = next(iter(minari.load_dataset(dsid).storage.get_episode_metadata([0])))
    # (with the default window of 16 this episode ends later: 14,545 s against 9,787 s)
    assert meta["episode_metrics"]["avg_jct"] == run_reference("aryl", "tiny", 4).avg_jct


def test_minari_dataset_equals_the_npz_recording(in_store: Path) -> None:
    from aryl_gym.commands.demos import record
    from aryl_gym.train.bc import discounted_returns, load_demos

    npz = record("tiny", "aryl", 2, SEED, "sequential", 16)
    obs, actions, masks = load_demos(f"minari:{DSID}")
    np.testing.assert_array_equal(actions, npz["actions"])
    np.testing.assert_array_equal(masks, npz["masks"])
    for k, v in obs.items():
        np.testing.assert_array_equal(v, npz[f"obs_{k}"])
    # a bare id that is a local dataset is read as one too
    obs2, actions2, _ = load_demos(DSID)
    np.testing.assert_array_equal(actions2, actions)
    ret = discounted_returns(f"minari:{DSID}", 1.0)
    assert ret is not None
    ends = np.flatnonzero(npz["terminated"] | npz["truncated"])
    # undiscounted: the first step's return is its episode's total reward
    assert ret[0] == pytest.approx(float(npz["rewards"][: ends[0] + 1].sum()), rel=1e-5)


def test_missing_dataset_is_a_config_error(in_store: Path) -> None:
    from aryl_gym.train.bc import load_demos

    with pytest.raises(ConfigError, match="aryl_gym/tiny/nope-v0.*aryl-gym demos --format minari"):
        load_demos("minari:aryl_gym/tiny/nope-v0")


def test_cli_writes_refuses_to_overwrite_and_replaces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["demos", "--format", "minari", "--scenario", "tiny", "--policy", "fifo", "--episodes", "1",
            "--seed", "7", "--minari-path", str(tmp_path), "--json"]
    assert cli_main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dataset_id"] == "aryl_gym/tiny/fifo-v0" and out["episodes"] == 1
    assert (tmp_path / "aryl_gym/tiny/fifo-v0/data/metadata.json").is_file()
    assert cli_main(args) == 2
    assert "exists" in capsys.readouterr().err
    assert cli_main([*args, "--overwrite", "--dataset-id", "me/x-v3"]) == 0
    assert json.loads(capsys.readouterr().out)["dataset_id"] == "me/x-v3"
    assert cli_main([*args, "--out", "x.npz"]) == 2
    assert "--out is for --format npz" in capsys.readouterr().err
    assert cli_main(["demos", "--scenario", "tiny", "--minari-path", str(tmp_path), "--out", "x.npz"]) == 2
    assert "--minari-path is for --format minari" in capsys.readouterr().err


@pytest.mark.slow  # torch and SB3 imports and a model: several seconds
def test_bc_pretrain_reads_a_minari_dataset(in_store: Path) -> None:
    pytest.importorskip("sb3_contrib")
    from aryl_gym.train.bc import pretrain
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import build_model, make_vec_env

    cfg = load_train_config("maskable_ppo", "tiny").replace(n_envs=1)
    venv = make_vec_env(cfg)
    try:
        model = build_model(cfg, venv)
        stats = pretrain(model, f"minari:{DSID}", epochs=3, batch_size=64, learning_rate=1e-3)
    finally:
        venv.close()
    assert stats["steps"] == minari.load_dataset(DSID).total_steps
    assert stats["value_mse"] == stats["value_mse"]  # rewards and ends were read: the critic was fit
    assert stats["accuracy"] > 0.5


def test_placement_options_as_a_dict() -> None:
    import gymnasium as gym

    from aryl_gym.sim.view import PlacementOptions

    env = gym.make("aryl_gym/Aryl-v2", scenario="tiny", placement={"group_flexible": False})
    assert env.unwrapped.placement == PlacementOptions(group_flexible=False)
    env.close()
    with pytest.raises(ValueError, match="unknown placement option 'nope'"):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", placement={"nope": True})
    with pytest.raises(ValueError, match="must be true or false"):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", placement={"hetero": 1})
