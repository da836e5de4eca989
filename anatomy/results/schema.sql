-- The results database: every number of the experiment, built by `python -m anatomy collect`.
--
-- One row per run in `runs`, one row per evaluation in `metrics`, one per generated text in
-- `samples`, one per Snakemake benchmark record in `benchmarks`. The views answer the questions
-- the experiment asks: how low did val go and when (`run_summary`), how big is that over seeds
-- (`experiment_summary`), and which part earned the gain (`ablation_summary`).
--
-- Losses are in nats per character. A NaN or infinite loss is stored as such (it is how a
-- diverged run looks); a NULL val_loss is a row where val was not evaluated.

-- The roles the report and the dashboard name runs by, from the model settings, so that they
-- hold for any experiment name: how a model knows positions (RoPE, a broken RoPE, or a learned
-- table), and how many query heads share a KV head (MHA one each, MQA one for all, GQA groups).
CREATE MACRO position_kind(pos_type, rope_break) AS
    CASE
        WHEN coalesce(pos_type, '') <> 'rope' THEN 'learned positions'
        WHEN coalesce(rope_break, 'none') <> 'none' THEN 'RoPE broken: ' || replace(rope_break, '_', ' ')
        ELSE 'RoPE'
    END;
CREATE MACRO attention_kind(n_head, n_kv_head) AS
    CASE WHEN n_kv_head >= n_head THEN 'MHA' WHEN n_kv_head = 1 THEN 'MQA' ELSE 'GQA' END;
-- How many of the five parts that make the mini-LLaMA a model has: 0 is the 2017 model, 5 the
-- mini-LLaMA; an ablation, one part away from either, has 1 or 4.
CREATE MACRO llama_parts(norm_type, norm_pos, pos_type, n_head, n_kv_head, ffn_type) AS
    (norm_type = 'rmsnorm')::INTEGER + (norm_pos = 'pre')::INTEGER + (pos_type = 'rope')::INTEGER
    + (n_kv_head < n_head)::INTEGER + (ffn_type = 'swiglu')::INTEGER;

CREATE TABLE runs (
    run_id           VARCHAR PRIMARY KEY,  -- folder relative to the runs root: "vanilla/seed42"
    experiment       VARCHAR NOT NULL,
    seed             INTEGER,
    "group"          VARCHAR,              -- headline | ablation | break | ... (quote it: a keyword)
    part             VARCHAR,              -- the swapped part (norm, norm_pos, rope, gqa, swiglu, ...)
    direction        VARCHAR,              -- add (its baseline plus one part) | remove (its baseline minus one)
    baseline         VARCHAR,              -- the experiment it is compared with, seed by seed; NULL: none
    description      VARCHAR,
    -- the text it read: a name (workflow/corpora.yaml, or the source folder) and a sha256 of its
    -- tokens (NULL for runs from before digests were recorded), with its sizes
    corpus           VARCHAR,
    corpus_digest    VARCHAR,
    vocab_size       INTEGER,
    train_tokens     BIGINT,
    val_tokens       BIGINT,
    "precision"      VARCHAR,              -- fp32 | bf16 (anatomy/precision.py; quote it: a keyword)
    config           JSON NOT NULL,        -- the run's whole config.json
    -- its training without the seed (anatomy.config.settings_key): runs that share it differ in the
    -- seed alone, whichever experiments declare them; NULL where the config does not resolve
    settings         VARCHAR,
    preset           VARCHAR,
    -- every model setting (from config.json; a setting it leaves out is anatomy.config.ModelConfig's
    -- default; its vocabulary is vocab_size above): width, depth, attention heads, the part switches
    d_model          INTEGER,
    n_layer          INTEGER,
    ctx_len          INTEGER,
    n_head           INTEGER,
    n_kv_head        INTEGER,              -- fewer than n_head: grouped-query attention (1: multi-query)
    norm_type        VARCHAR,              -- layernorm | rmsnorm
    norm_pos         VARCHAR,              -- post | pre
    pos_type         VARCHAR,              -- learned | rope
    rope_break       VARCHAR,              -- none | k_unrotated | k_adjacent
    ffn_type         VARCHAR,              -- gelu | swiglu
    qk_norm          BOOLEAN,              -- a norm on q and k before scoring
    attn_type        VARCHAR,              -- mha | mla (a cached latent, kv_latent wide, and a shared rope_dim key)
    kv_latent        INTEGER,
    rope_dim         INTEGER,
    n_experts        INTEGER,              -- ffn_type moe: top_k of n_experts SwiGLUs per token
    top_k            INTEGER,
    moe_aux_weight   DOUBLE,               -- the load-balancing loss's weight in the training loss
    impl             VARCHAR,              -- fused | manual: the same numbers, two ways to compute them
    -- the training settings a study compares (anatomy.config.TrainConfig's default where left out)
    lr               DOUBLE,
    schedule         VARCHAR,              -- constant | cosine, after warmup
    warmup_steps     INTEGER,
    optimizer        VARCHAR,              -- the AdamW recipe in words (TrainConfig.optimizer_recipe)
    params           BIGINT,
    device           VARCHAR,
    compiled         BOOLEAN,              -- training steps ran through torch.compile
    torch_version    VARCHAR,
    status           VARCHAR NOT NULL,     -- done | diverged | running (no summary.json yet)
    diverged         BOOLEAN NOT NULL,
    diverged_step    INTEGER,
    steps_done       INTEGER,
    best_val_loss    DOUBLE,
    best_step        INTEGER,
    final_train_loss DOUBLE,
    final_val_loss   DOUBLE,
    step_time_s      DOUBLE,
    tokens_per_s     DOUBLE
);

CREATE TABLE metrics (
    run_id      VARCHAR NOT NULL REFERENCES runs (run_id),
    step        INTEGER NOT NULL,
    train_loss  DOUBLE,
    val_loss    DOUBLE,
    lr          DOUBLE,
    tokens_seen BIGINT,
    elapsed_s   DOUBLE,
    PRIMARY KEY (run_id, step)
);

CREATE TABLE samples (
    run_id      VARCHAR NOT NULL REFERENCES runs (run_id),
    sample_idx  INTEGER NOT NULL,          -- position in samples.json
    checkpoint  VARCHAR,
    prefix      VARCHAR,
    temperature DOUBLE,
    seed        INTEGER,
    chars       INTEGER,
    text        VARCHAR,                -- NULL when there was nothing to sample from
    note        VARCHAR,                -- e.g. "run diverged at step 40; sampled from the best checkpoint"
    -- memorisation (anatomy/generation/memorisation.py); NULL when not measured. A span of at least
    -- copy_min_chars generated characters found verbatim in the training split counts as copied.
    copy_min_chars      INTEGER,
    copied_fraction     DOUBLE,         -- share of generated characters (prefix excluded) in copied spans
    val_copied_fraction DOUBLE,         -- the same against the validation split: the control
    longest_copy        INTEGER,        -- characters
    longest_copy_text   VARCHAR,
    longest_copy_post   VARCHAR,        -- the post of the training text it comes from
    longest_copy_line   INTEGER,        -- its line in that post's extracted text
    copied_spans        JSON,           -- [[start, length, post, line], ...]: spans of `text` and their source
    PRIMARY KEY (run_id, sample_idx)
);

-- Snakemake `benchmark:` files: results/benchmarks/{rule}/{job}.tsv, one row per repeat.
CREATE TABLE benchmarks (
    rule      VARCHAR NOT NULL,            -- e.g. train_model
    job       VARCHAR NOT NULL,            -- e.g. vanilla/seed42
    run_id    VARCHAR,                     -- the run the job produced, when there is one
    repeat    INTEGER NOT NULL,
    s         DOUBLE,                      -- wall-clock seconds
    hms       VARCHAR,
    max_rss   DOUBLE,                      -- MB
    max_vms   DOUBLE,
    max_uss   DOUBLE,
    max_pss   DOUBLE,
    io_in     DOUBLE,
    io_out    DOUBLE,
    mean_load DOUBLE,
    cpu_time  DOUBLE,
    PRIMARY KEY (rule, job, repeat)
);

-- One row per run: computed from the metrics, so a run still training has numbers too.
-- The overfitting turn: val bottoms out at `best_step`; `val_rise` is how far it climbed after
-- (final minus minimum, the final val evaluated at `final_val_step`); `train_val_gap` is final
-- val minus final train.
CREATE VIEW run_summary AS
WITH finite_val AS (
    SELECT run_id, step, val_loss FROM metrics WHERE isfinite(val_loss)
),
best AS (
    -- the first step reaching the minimum (ties go to the earlier step)
    SELECT run_id, min(val_loss) AS best_val_loss, arg_min(step, (val_loss, step)) AS best_step
    FROM finite_val GROUP BY run_id
),
last_val AS (
    SELECT run_id, arg_max(val_loss, step) AS final_val_loss, max(step) AS final_val_step
    FROM metrics WHERE val_loss IS NOT NULL GROUP BY run_id
),
last_train AS (
    SELECT run_id, arg_max(train_loss, step) AS final_train_loss
    FROM metrics WHERE train_loss IS NOT NULL GROUP BY run_id
),
progress AS (
    SELECT run_id, max(step) AS last_step, max(elapsed_s) AS elapsed_s, count(*) AS n_evals
    FROM metrics GROUP BY run_id
)
SELECT
    r.run_id, r.experiment, r.seed, r."group", r.part, r.direction, r.baseline, r.description, r.preset,
    r.corpus, r.corpus_digest, r.vocab_size, r.train_tokens, r.val_tokens, r."precision", r.settings,
    r.n_layer, r.ctx_len, r.n_head, r.n_kv_head, r.norm_type, r.norm_pos, r.pos_type, r.rope_break, r.ffn_type,
    r.params, r.device, r.status, r.diverged, r.diverged_step,
    position_kind(r.pos_type, r.rope_break) AS positions,
    attention_kind(r.n_head, r.n_kv_head) AS attention,
    coalesce(p.last_step, r.steps_done) AS last_step,
    p.n_evals,
    p.elapsed_s,
    coalesce(b.best_val_loss, r.best_val_loss) AS best_val_loss,
    coalesce(b.best_step, r.best_step) AS best_step,
    coalesce(lv.final_val_loss, r.final_val_loss) AS final_val_loss,
    lv.final_val_step,
    coalesce(lt.final_train_loss, r.final_train_loss) AS final_train_loss,
    coalesce(lv.final_val_loss, r.final_val_loss)
        - coalesce(b.best_val_loss, r.best_val_loss) AS val_rise,
    coalesce(lv.final_val_loss, r.final_val_loss)
        - coalesce(lt.final_train_loss, r.final_train_loss) AS train_val_gap,
    r.step_time_s,
    r.tokens_per_s,
    r.compiled
FROM runs r
LEFT JOIN best b USING (run_id)
LEFT JOIN last_val lv USING (run_id)
LEFT JOIN last_train lt USING (run_id)
LEFT JOIN progress p USING (run_id);

-- The overfitting turn, evaluation by evaluation: how far each finite val after a run's best
-- step lies above that best. The turn "by a margin" is the first step where this exceeds it.
CREATE VIEW val_above_best AS
SELECT m.run_id, m.step, m.val_loss, m.val_loss - s.best_val_loss AS above_best
FROM metrics m
JOIN run_summary s USING (run_id)
WHERE isfinite(m.val_loss) AND m.step >= s.best_step;

-- One row per experiment: mean, min and max over its seeds.
CREATE VIEW experiment_summary AS
SELECT
    experiment,
    any_value("group") AS "group",
    any_value(part) AS part,
    any_value(direction) AS direction,
    any_value(baseline) AS baseline,
    any_value(preset) AS preset,
    count(*) AS n_runs,
    count(*) FILTER (WHERE status = 'done') AS n_done,
    count(*) FILTER (WHERE status = 'running') AS n_running,
    count(*) FILTER (WHERE diverged) AS n_diverged,
    list(seed ORDER BY seed) AS seeds,
    max(params) AS params,
    avg(best_val_loss) AS best_val_mean,
    min(best_val_loss) AS best_val_min,
    max(best_val_loss) AS best_val_max,
    max(best_val_loss) - min(best_val_loss) AS best_val_spread,  -- the seed noise of this experiment
    avg(best_step) AS best_step_mean,
    min(best_step) AS best_step_min,
    max(best_step) AS best_step_max,
    avg(final_val_loss) AS final_val_mean,
    min(final_val_loss) AS final_val_min,
    max(final_val_loss) AS final_val_max,
    avg(final_train_loss) AS final_train_mean,
    avg(val_rise) AS val_rise_mean,
    avg(train_val_gap) AS train_val_gap_mean,
    avg(step_time_s) AS step_time_s_mean,
    avg(tokens_per_s) AS tokens_per_s_mean
FROM run_summary
GROUP BY experiment;

-- The seed noise of a setup: one corpus at one size, trained in one precision. The per-run
-- standard deviation of best val, pooled over every training there with two or more finished
-- seeds: each training's sample variance, weighted by its degrees of freedom (seeds - 1). A
-- training is its settings without the seed, so two experiments that declare one training at
-- different seeds (a study's seed 7 beside another study's seed 42) make one pair. One estimate
-- for every comparison in the setup (anatomy/report/uncertainty.py turns it into intervals),
-- rather than each training's own spread over two seeds: one degree of freedom.
-- A run whose best val is its first evaluation never trained (an lr too high, say): how far two
-- such runs land apart is not the noise of training, so it is left out.
CREATE VIEW setup_noise AS
WITH first_eval AS (
    SELECT run_id, min(step) AS first_step FROM metrics WHERE isfinite(val_loss) GROUP BY run_id
),
per_training AS (
    SELECT corpus, vocab_size, train_tokens, val_tokens, "precision", coalesce(settings, experiment) AS training,
        count(*) AS n, var_samp(best_val_loss) AS variance
    FROM run_summary JOIN first_eval USING (run_id)
    WHERE status = 'done' AND isfinite(best_val_loss) AND best_step > first_step
    GROUP BY corpus, vocab_size, train_tokens, val_tokens, "precision", training
)
SELECT
    corpus, vocab_size, train_tokens, val_tokens, "precision",
    count(*) AS trainings,
    sum(n - 1) AS df,
    sqrt(sum((n - 1) * variance) / sum(n - 1)) AS sd
FROM per_training
WHERE n >= 2
GROUP BY corpus, vocab_size, train_tokens, val_tokens, "precision";

-- The seed band: per experiment and evaluation, val loss over its seeds (finite values only, so
-- a diverged seed leaves the band where it broke).
CREATE VIEW seed_band AS
SELECT
    r.experiment, m.step,
    avg(m.val_loss) AS "mean", min(m.val_loss) AS "min", max(m.val_loss) AS "max", count(*) AS n_seeds
FROM metrics m
JOIN runs r USING (run_id)
WHERE isfinite(m.val_loss)
GROUP BY r.experiment, m.step;

-- How much of each sample is copied from the training text, per run and checkpoint: compare a
-- run's best checkpoint (before the overfitting turn) with its last, and both with the val control.
CREATE VIEW sample_memorisation AS
SELECT
    s.run_id, m.experiment, m.seed, s.sample_idx, s.checkpoint,
    -- the training step of the weights that wrote the sample
    CASE s.checkpoint WHEN 'best' THEN m.best_step WHEN 'last' THEN m.last_step END AS step,
    s.copy_min_chars, s.copied_fraction, s.val_copied_fraction, s.longest_copy, s.longest_copy_post
FROM samples s
JOIN run_summary m USING (run_id)
WHERE s.copied_fraction IS NOT NULL;

-- Each run against its baseline's run with the same seed (same batches, only the change differs):
-- `runs.baseline` names the experiment (workflow/experiments.yaml says which). A negative delta
-- means a lower loss (or an earlier best step) than the baseline's. Never across corpora: both
-- read the same tokens (equal digests; a run from before digests, by its sizes alone).
CREATE VIEW baseline_pairs AS
SELECT
    a.run_id, a.experiment, a."group", a.part, a.direction, a.seed, a.baseline,
    base.run_id AS baseline_run_id,
    a.best_val_loss - base.best_val_loss AS delta_best_val,
    a.best_step - base.best_step AS delta_best_step,
    a.final_val_loss - base.final_val_loss AS delta_final_val
FROM run_summary a
JOIN run_summary base ON base.experiment = a.baseline AND base.seed = a.seed
    AND base.vocab_size IS NOT DISTINCT FROM a.vocab_size
    AND base.train_tokens IS NOT DISTINCT FROM a.train_tokens
    AND base.val_tokens IS NOT DISTINCT FROM a.val_tokens
    AND (a.corpus_digest IS NULL OR base.corpus_digest IS NULL OR a.corpus_digest = base.corpus_digest);

-- Each experiment against its baseline, over the seeds both have: mean, min and max difference.
-- n_seeds counts the seeds with a best val on both sides (a run that diverged before its first
-- evaluation has none), the seeds that min, max and mean are over.
CREATE VIEW baseline_summary AS
SELECT
    experiment, any_value("group") AS "group", part, direction, baseline,
    count(delta_best_val) AS n_seeds,
    list(seed ORDER BY seed) AS seeds,
    avg(delta_best_val) AS delta_best_val_mean,
    min(delta_best_val) AS delta_best_val_min,
    max(delta_best_val) AS delta_best_val_max,
    avg(delta_final_val) AS delta_final_val_mean
FROM baseline_pairs
GROUP BY experiment, part, direction, baseline;

-- Which part earned the gain: the grid's ablations against their baselines (a study's ablations,
-- such as the scale study's, are in baseline_summary). "add" runs are a model plus one part,
-- "remove" runs a model minus one. A negative delta_add means adding the part helped; a positive
-- delta_remove means removing it hurt.
CREATE VIEW ablation_summary AS
SELECT
    experiment, part, direction, baseline, n_seeds, seeds,
    delta_best_val_mean, delta_best_val_min, delta_best_val_max, delta_final_val_mean
FROM baseline_summary
WHERE direction IN ('add', 'remove') AND part IS NOT NULL AND "group" = 'ablation';

-- ---------------------------------------------------------------------------------------------
-- The exams (anatomy/exams/): each part tested where it is made to pay. A run's exams are small
-- files in its folder (exams/*.json, grad_norms.jsonl), so they ship with it; exams not tied to
-- one grid run (the depth map, the wall clock per part) live in results/exams/.

-- RoPE: loss by position, on validation windows up to 8x the training length.
CREATE TABLE exam_length (
    run_id       VARCHAR NOT NULL REFERENCES runs (run_id),
    checkpoint   VARCHAR NOT NULL,         -- the weights examined: best | last
    ctx_len      INTEGER NOT NULL,         -- the length the model was trained on
    window_len   INTEGER NOT NULL,         -- the evaluation window, characters
    bucket_start INTEGER NOT NULL,         -- positions bucket_start..bucket_end (0-based, inclusive)
    bucket_end   INTEGER NOT NULL,
    possible     BOOLEAN NOT NULL,         -- false: the model cannot read this far (a learned table ends at ctx_len)
    reason       VARCHAR,                  -- why not, when not possible
    loss         DOUBLE,                   -- mean loss of the predictions at these positions; NULL when not possible
    predictions  BIGINT,                   -- how many predictions the mean is over
    PRIMARY KEY (run_id, window_len, bucket_start)
);

-- GQA: the KV cache's bytes, measured from the cache tensors and by the formula.
CREATE TABLE exam_kv_cache (
    run_id         VARCHAR NOT NULL REFERENCES runs (run_id),
    n_kv_head      INTEGER NOT NULL,
    tokens         INTEGER NOT NULL,       -- cached positions: 1 (bytes per token), 512, 2048
    measured_bytes BIGINT NOT NULL,        -- KVCache.nbytes() after generating this many
    formula_bytes  BIGINT NOT NULL,        -- 2 (k and v) x n_layer x n_kv_head x head_dim x tokens x bytes per value
    PRIMARY KEY (run_id, tokens)
);

-- GQA: generation time with and without the cache.
CREATE TABLE exam_kv_timing (
    run_id      VARCHAR NOT NULL REFERENCES runs (run_id),
    n_kv_head   INTEGER NOT NULL,
    context     INTEGER NOT NULL,          -- characters already in the context when timing starts
    chars       INTEGER NOT NULL,          -- characters generated while timed
    cached      BOOLEAN NOT NULL,          -- true: KV cache; false: the whole context recomputed per character
    seconds     DOUBLE NOT NULL,           -- median over rounds
    chars_per_s DOUBLE NOT NULL,
    PRIMARY KEY (run_id, context, cached)
);

-- GQA at LLaMA scale: the cache of a 7B-class model, by the same formula.
CREATE TABLE exam_kv_scale (
    name          VARCHAR NOT NULL,        -- e.g. "7B-class, 32 KV heads (MHA)"
    n_layer       INTEGER NOT NULL,
    n_kv_head     INTEGER NOT NULL,
    head_dim      INTEGER NOT NULL,
    tokens        BIGINT NOT NULL,
    element_bytes INTEGER NOT NULL,
    bytes         BIGINT NOT NULL,
    PRIMARY KEY (name)
);

-- Pre-norm: the stability map, 12 layers without warmup, post-norm against pre-norm over lr.
CREATE TABLE exam_depth (
    cell             VARCHAR PRIMARY KEY,  -- folder under results/exams/depth/, e.g. "post_lr0.001"
    norm_pos         VARCHAR NOT NULL,     -- post | pre
    lr               DOUBLE NOT NULL,
    n_layer          INTEGER NOT NULL,
    steps            INTEGER NOT NULL,     -- steps asked for
    seed             INTEGER NOT NULL,
    status           VARCHAR NOT NULL,     -- done | diverged | running
    diverged         BOOLEAN NOT NULL,
    diverged_step    INTEGER,
    trained          BOOLEAN NOT NULL,     -- finished without diverging and learned (anatomy/exams/depth.py says how)
    best_val_loss    DOUBLE,
    best_step        INTEGER,
    final_train_loss DOUBLE,               -- the loss at the last step
    final_val_loss   DOUBLE,
    unigram_loss     DOUBLE                -- the corpus's unigram loss: what a model that ignores the context reaches
);

-- Pre-norm: the gradient norm of every block (layer 0 nearest the embedding), logged by the
-- trainer at every step for the first 200, then at every eval. run_id is a grid run
-- ("deep_post_nowarmup/seed42") or a depth-map cell ("depth/post_lr0.001").
CREATE TABLE grad_norms (
    run_id VARCHAR NOT NULL,
    step   INTEGER NOT NULL,
    layer  INTEGER NOT NULL,
    norm   DOUBLE,                         -- NaN once the gradients are NaN
    PRIMARY KEY (run_id, step, layer)
);

-- Pitfall 4: the wall clock of each part alone, forward + backward, hand-written against fused.
CREATE TABLE exam_wall_clock (
    part      VARCHAR NOT NULL,            -- norm | rope | attention | ffn | step
    variant   VARCHAR NOT NULL,            -- layernorm, rmsnorm, rope, mha, gqa, gelu, swiglu, vanilla, llama
    impl      VARCHAR NOT NULL,            -- manual | fused
    shape     VARCHAR NOT NULL,            -- the input timed, e.g. "32x128x128" (batch x length x width)
    median_ms DOUBLE NOT NULL,
    min_ms    DOUBLE NOT NULL,
    max_ms    DOUBLE NOT NULL,
    rounds    INTEGER NOT NULL,
    PRIMARY KEY (part, variant, impl)
);

-- QK-norm: the stability map, the mini-LLaMA without warmup, with and without QK-norm over lr.
CREATE TABLE exam_qk_norm (
    cell             VARCHAR PRIMARY KEY,  -- folder under results/exams/qk_norm/, e.g. "qk_norm_lr0.01"
    variant          VARCHAR NOT NULL,     -- plain | qk_norm
    lr               DOUBLE NOT NULL,
    steps            INTEGER NOT NULL,
    status           VARCHAR NOT NULL,     -- done | diverged | running
    diverged_step    INTEGER,
    trained          BOOLEAN NOT NULL,     -- as exam_depth defines it (anatomy/exams/depth.py)
    best_val_loss    DOUBLE,
    final_train_loss DOUBLE,
    peak_max_logit   DOUBLE,               -- the largest attention logit of any layer at any logged step
    last_max_logit   DOUBLE                -- the largest at the last logged step
);

-- MLA: the KV cache's bytes per character against the best val, MHA, GQA, MQA and MLA.
CREATE TABLE exam_mla (
    cell           VARCHAR PRIMARY KEY,    -- folder under results/exams/mla/: mha, gqa, mqa, mla_latentN
    attn_type      VARCHAR NOT NULL,       -- mha | mla
    n_kv_head      INTEGER NOT NULL,
    kv_latent      INTEGER,                -- MLA's latent width; NULL for mha
    tokens         INTEGER,                -- cached positions measured (NULL until measured)
    measured_bytes BIGINT,                 -- KVCache.nbytes() after that many
    formula_bytes  BIGINT,                 -- ModelConfig.kv_cache_bytes (equal, or the exam stops)
    bytes_per_char DOUBLE,
    best_val_loss  DOUBLE,
    chars_per_s    DOUBLE                  -- generation with the cache, median of the rounds
);

-- Experts: best val at equal active and at equal total parameters, the load, the step time.
CREATE TABLE exam_moe (
    cell          VARCHAR PRIMARY KEY,     -- dense | moe_top1 | moe_top2 | moe_all
    n_experts     INTEGER,                 -- NULL for dense
    top_k         INTEGER,
    params        BIGINT NOT NULL,
    active_params BIGINT NOT NULL,         -- what one token passes through
    best_val_loss DOUBLE,
    min_share     DOUBLE,                  -- the smallest and largest share of the tokens any expert
    max_share     DOUBLE,                  --   took at the last logged step (even: 1 / n_experts)
    run_step_s    DOUBLE,                  -- the cell's own training's median step time
    step_ms       DOUBLE,                  -- a step timed in the exam's one process, interleaved
    step_ratio    DOUBLE                   -- its median per-round ratio to dense's
);

-- The largest attention logit of each layer (opt-in, train.log_max_logits), and each expert's
-- share of the tokens (runs with experts), at the gradient norms' steps. run_id as in grad_norms.
CREATE TABLE max_logits (
    run_id    VARCHAR NOT NULL,
    step      INTEGER NOT NULL,
    layer     INTEGER NOT NULL,
    max_logit DOUBLE,                      -- NaN once the step's logits are
    PRIMARY KEY (run_id, step, layer)
);

CREATE TABLE expert_shares (
    run_id VARCHAR NOT NULL,
    step   INTEGER NOT NULL,
    layer  INTEGER NOT NULL,
    expert INTEGER NOT NULL,
    share  DOUBLE,
    PRIMARY KEY (run_id, step, layer, expert)
);

-- The runs the experiments file declares (results/experiments.json, which the workflow writes):
-- each experiment's seeds, with its group and stage, so that a study's section can say which of
-- its runs are still to train. Empty where collect read no experiments file, or one that lists no
-- runs (workflow/experiments.yaml itself: its seeds may be the config's).
CREATE TABLE declared_runs (
    experiment VARCHAR NOT NULL,
    seed       INTEGER NOT NULL,
    "group"    VARCHAR,                    -- quote it: a keyword
    stage      INTEGER,                    -- NULL: an experiment not run in stages
    -- the run whose training its folder repeats, which collect kept instead (anatomy/results/repeats.py)
    repeat_of  VARCHAR,
    PRIMARY KEY (experiment, seed)
);

-- The experts' load of each run with shares: the smallest and largest share any expert took at
-- the run's last logged step. Computed by collect with the MoE exam's own definition
-- (anatomy/training/layer_logs.py `expert_load`), so that the exam and the runs say it alike.
CREATE TABLE expert_load (
    run_id    VARCHAR PRIMARY KEY,
    min_share DOUBLE NOT NULL,
    max_share DOUBLE NOT NULL
);

-- Pre-norm: the largest learning rate at which each wiring still trains, from the map.
CREATE VIEW depth_stability AS
SELECT
    norm_pos,
    count(*) AS cells,
    max(lr) FILTER (WHERE trained) AS max_trained_lr,
    min(lr) FILTER (WHERE NOT trained) AS min_failed_lr
FROM exam_depth
GROUP BY norm_pos;

-- Pre-norm: first-layer against last-layer gradient norm over time, per run.
CREATE VIEW grad_norm_spread AS
WITH ends AS (
    SELECT run_id, max(layer) AS last_layer FROM grad_norms GROUP BY run_id
)
SELECT
    g.run_id, g.step,
    max(g.norm) FILTER (WHERE g.layer = 0) AS first_layer_norm,
    max(g.norm) FILTER (WHERE g.layer = e.last_layer) AS last_layer_norm,
    max(g.norm) FILTER (WHERE g.layer = 0) / max(g.norm) FILTER (WHERE g.layer = e.last_layer) AS first_to_last
FROM grad_norms g
JOIN ends e USING (run_id)
GROUP BY g.run_id, g.step;

-- The exams' findings: every number the report and the dashboard's Exams page state.

-- RoPE: per run, on the longest window it could read at all: the mean loss within the training
-- length (each bucket weighted by its predictions), and the loss at the farthest positions
-- (NULL where the model cannot read that far: a learned table). far_over_within: how much worse
-- reading past the training length is.
CREATE VIEW length_reach AS
WITH longest AS (
    SELECT run_id, max(window_len) AS window_len FROM exam_length WHERE possible GROUP BY run_id
),
windows AS (
    SELECT e.* FROM exam_length e JOIN longest USING (run_id, window_len)
),
within AS (
    SELECT run_id, sum(loss * predictions) / sum(predictions) AS within_loss, max(bucket_end) AS within_end
    FROM windows WHERE possible AND bucket_end < ctx_len AND isfinite(loss) GROUP BY run_id
),
far AS (
    SELECT w.run_id, w.bucket_start AS far_start, w.bucket_end AS far_end, w.possible AS far_possible,
        CASE WHEN w.possible THEN w.loss END AS far_loss
    FROM windows w
    JOIN (SELECT run_id, max(bucket_start) AS bucket_start FROM windows GROUP BY run_id) m USING (run_id, bucket_start)
)
SELECT
    l.run_id, r.experiment, r.seed, position_kind(r.pos_type, r.rope_break) AS positions,
    l.window_len, (SELECT max(ctx_len) FROM windows x WHERE x.run_id = l.run_id) AS ctx_len,
    i.within_loss, i.within_end, f.far_start, f.far_end, f.far_possible, f.far_loss,
    f.far_loss / i.within_loss AS far_over_within
FROM longest l
JOIN runs r USING (run_id)
LEFT JOIN within i USING (run_id)
LEFT JOIN far f USING (run_id);

-- GQA: the cache's bytes per cached position, measured and by the formula, per attention kind
-- (median over the runs measured).
CREATE VIEW kv_cache_per_token AS
SELECT
    attention_kind(r.n_head, c.n_kv_head) AS attention,
    c.n_kv_head,
    median(c.measured_bytes / c.tokens) AS measured,
    median(c.formula_bytes / c.tokens) AS formula,
    string_agg(DISTINCT r.experiment, ', ' ORDER BY r.experiment) AS experiments
FROM exam_kv_cache c
JOIN runs r USING (run_id)
GROUP BY ALL;

-- GQA: characters per second with the cache and with the whole context recomputed, per attention
-- kind and context (median over runs), where both were timed; speedup is the one over the other.
CREATE VIEW kv_cache_speedup AS
SELECT *, cached / recomputed AS speedup
FROM (
    SELECT
        attention_kind(r.n_head, t.n_kv_head) AS attention,
        t.context,
        median(t.chars_per_s) FILTER (WHERE t.cached) AS cached,
        median(t.chars_per_s) FILTER (WHERE NOT t.cached) AS recomputed
    FROM exam_kv_timing t
    JOIN runs r USING (run_id)
    GROUP BY ALL
)
WHERE cached IS NOT NULL AND recomputed IS NOT NULL;

-- GQA at LLaMA scale, in GiB (2^30 bytes).
CREATE VIEW kv_cache_at_scale AS
SELECT *, bytes / 1073741824.0 AS gib FROM exam_kv_scale;

-- Pitfall 4: per part and variant, the hand-written and the fused median time (NULL where it was
-- timed one way only), and how many times slower by hand.
CREATE VIEW wall_clock_ratios AS
SELECT *, manual_ms / fused_ms AS manual_over_fused
FROM (
    SELECT
        part, variant, min(shape) AS shape,
        max(median_ms) FILTER (WHERE impl = 'manual') AS manual_ms,
        max(median_ms) FILTER (WHERE impl = 'fused') AS fused_ms
    FROM exam_wall_clock
    GROUP BY part, variant
);
