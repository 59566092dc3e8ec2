"""ppo-v1 with and without window_fit on testbed: idle GPU-hours and avg JCT, paired by seed."""
import sys, numpy as np
from aryl_gym.agents.learned import load_agent
from aryl_gym.config import load_scenario
from aryl_gym.rollout import run_agent_batch
from aryl_gym.stats import paired_bootstrap_ratio
load = float(sys.argv[1]); seeds = [int(s) for s in sys.argv[2].split(",")]
fits = [int(x) for x in sys.argv[3].split(",")]
cfg = load_scenario("testbed").replace(workload={"load": load})
agent = load_agent("ppo-v1")
print("agent kwargs", agent.env_kwargs)
res = {}
for wf in fits:
    envs = [agent.make_env(cfg, window_fit=wf) for _ in seeds]
    out = run_agent_batch(agent, envs, seeds, deterministic=True)
    res[wf] = [r for r, _, _ in out]
    for e in envs: e.close()
for wf, rs in res.items():
    idle = [ (1 - r.train_util_makespan) * r.makespan * 32 / 3600 for r in rs]
    print(f"window_fit={wf}: mean avg_jct {np.mean([r.avg_jct for r in rs]):,.0f} failed {sum(r.failed for r in rs)} "
          f"train_util {np.mean([r.train_util for r in rs]):.3f} per-seed jct {[round(r.avg_jct) for r in rs][:6]}")
base = np.array([r.avg_jct for r in res[fits[0]]])
for wf in fits[1:]:
    x = np.array([r.avg_jct for r in res[wf]])
    print(f"window_fit={wf} / {fits[0]}: {paired_bootstrap_ratio(x, base)}")
