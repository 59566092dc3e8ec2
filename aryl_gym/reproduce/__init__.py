"""The paper's headline table, its sensitivity to the knobs the paper does not fix, the
prediction-error study and the heterogeneous-training study (``aryl-gym reproduce``;
``docs/reproduction.md``).

**Rows.** Each row of :data:`ROWS` is one claim of the paper as a ratio of one figure between two
policies on one scenario *role* (``basic``: the paper's Basic; ``ideal``: its Ideal), e.g. the
Aryl/Baseline average-JCT gain is ``avg_jct(fifo) / avg_jct(aryl)`` on ``basic``. A gain "+26.9%"
is stored as the ratio 1.269.

**Statistics.** Comparisons are paired by seed: both policies run on the same drawn episode.
For each seed we compute the ratio ``r_s``; the row's value is the *geometric mean* of the
``r_s`` and its 95% confidence interval is ``exp(mean(log r) +- t_{0.975, n-1} sd(log r) /
sqrt(n))`` (a Student-t interval on the log ratios, :func:`paired_ratio_ci`). With one seed the
interval is undefined (reported as ``-``). Seeds where a ratio is undefined (a zero or missing
figure, e.g. no preemption at all) are left out and counted.

**Tolerance.** +-20% of the paper's *gain*: a ratio ``R`` (gain ``R - 1``) is within tolerance
when ``1 + 0.8 (R - 1) <= ours <= 1 + 1.2 (R - 1)`` (1.50x -> 1.40x-1.60x; +26.9% -> +21.5% to
+32.3%), judged on the point estimate; ``ci_overlaps`` says whether the interval reaches the band.

**Scales.** ``paper``: the paper's Basic is production size (``production``), its Ideal is
``production`` with the workload fields in which ``ideal.yaml`` differs from ``basic.yaml``
(:func:`ideal_overrides`; today ``all_elastic: true`` and ``type_agnostic_fraction: 1.0``), 3
seeds for every policy (``pollux-250`` included). ``mid``: ``basic`` and ``ideal``, 5 seeds. ``tiny``: ``tiny`` and
``tiny`` with the same ideal overrides, 3 seeds (tests).

**Episodes** run once each and are shared between rows, through the runner every command that
runs many episodes uses (:mod:`aryl_gym.episodes`): every :class:`EpisodeResult` is cached as
``OUT/episodes/SCENARIO/POLICY/seedN-HASH.json`` (``HASH``: :func:`cache_hash`, over the resolved
scenario config, a learned agent's files and the metrics' version), written as soon as the
episode ends, so an interrupted run resumes and nothing computed is lost.
"""

# The package's modules, lower layers first: claims (rows and statistics), scales (roles and
# overrides), then report, sweeps and studies; episodes run through aryl_gym.episodes.
from aryl_gym.episodes import (  # noqa: F401 - episodes, the runner and its cache: aryl_gym.episodes
    AGENT_PREFIX,
    CacheError,
    EpisodeCache,
    EpisodeOutput,
    EpisodeTask,
    Executor,
    RunStats,
    cache_hash,
    cache_path,
    check_cached_result,
    local_executor,
    policy_task,
    ray_executor,
    read_cached,
    result_digest,
    result_from_cache,
    run_episode,
    run_tasks,
    write_cached,
)
from aryl_gym.provenance import config_hash  # noqa: F401
from aryl_gym.reproduce.claims import (  # noqa: F401
    PRIMARY_ROWS,
    READINGS,
    ROW_IDS,
    ROWS,
    Mechanism,
    Results,
    RowResult,
    RowSpec,
    compute_rows,
    explain,
    fmt_value,
    mechanism,
    paper_run_factor,
    render_mechanism_md,
    seed_ratio,
    select_rows,
    tolerance_band,
    within_tolerance,
)
from aryl_gym.reproduce.report import (  # noqa: F401
    all_seeds,
    render_table_md,
    render_table_text,
    replace_block,
    results_by_role,
    score,
    seeds_for,
    table_tasks,
    update_doc,
    wall_table_md,
    why_lines,
)
from aryl_gym.reproduce.scales import (  # noqa: F401
    DEFAULT_SWEEPS,
    SCALES,
    Scale,
    apply_override,
    check_key,
    ideal_overrides,
    parse_sweep,
    resolve_sweeps,
    role_configs,
)
from aryl_gym.reproduce.studies import (  # noqa: F401
    HETERO_FRACTIONS,
    HETERO_METRICS,
    HETERO_POLICIES,
    PREDICTION_METRICS,
    PREDICTION_POLICIES,
    PREDICTION_SIGMAS,
    check_policies,
    hetero_table,
    hetero_tasks,
    knob_tasks,
    prediction_table,
    prediction_tasks,
    render_hetero_md,
    render_prediction_md,
)
from aryl_gym.reproduce.sweeps import (  # noqa: F401
    SweepPoint,
    plot_sweep,
    render_sweep_md,
    render_sweep_mechanism_md,
    sweep_configs,
    sweep_findings,
)
from aryl_gym.stats import RatioStat, paired_bootstrap_ratio, paired_ratio_ci  # noqa: E402,F401 - the statistics, in aryl_gym.stats
