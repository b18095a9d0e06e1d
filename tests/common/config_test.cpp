#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/config.h"
#include "common/error.h"
#include "common/mpi_bootstrap.h"
#include "evaluation/eval_pipeline.h"
#include "support/test_util.h"

namespace leap {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_config(text, "leap.toml");
  } catch (const LeapError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, EmptyTextGivesDocumentedDefaults) {
  auto c = parse_config("", "leap.toml");
  EXPECT_EQ(c.eval.trials, 5u);
  EXPECT_DOUBLE_EQ(c.eval.rse_target, 0.01);
  EXPECT_DOUBLE_EQ(c.eval.speedup_bound, 10);
  EXPECT_EQ(c.sandbox.evaluators, 1);
}

TEST(Config, OverridesApply) {
  auto c = parse_config("[eval]\ntrials = 9\nrse_target = 0.02\n[sandbox]\ndeadline_s = 2.5\n[compile]\njobs = 3\n",
                        "leap.toml");
  EXPECT_EQ(c.eval.trials, 9u);
  EXPECT_DOUBLE_EQ(c.eval.rse_target, 0.02);
  EXPECT_DOUBLE_EQ(c.sandbox.deadline_s, 2.5);
  EXPECT_EQ(c.compile.jobs, 3);
  auto shared = parse_config("[sandbox]\nevaluators = 2\ngpus = 1\n", "leap.toml");  // two judges on one GPU
  EXPECT_EQ(shared.sandbox.evaluators, 2);
  EXPECT_EQ(shared.sandbox.gpus, 1);
}

TEST(Config, LearnerSection) {
  auto c = parse_config("[learner]\ngroup_size = 4\nt_min = 2\nt_max = 3\ndcp = false\nreward = \"kevin\"\n", "l.toml");
  EXPECT_EQ(c.learner.group_size, 4);
  EXPECT_FALSE(c.learner.dcp);
  EXPECT_EQ(c.learner.reward, "kevin");
  // Thresholds as fractions of G (the default: at least half failing, the paper's best range),
  // valid for any G >= 2; counts still accepted, not both for one bound.
  EXPECT_EQ(dcp_counts(parse_config("", "l.toml").learner), std::make_pair(4, 8));
  EXPECT_EQ(dcp_counts(parse_config("[learner]\ngroup_size = 2\n", "l.toml").learner), std::make_pair(1, 2));
  EXPECT_EQ(dcp_counts(parse_config("[learner]\ngroup_size = 5\n", "l.toml").learner), std::make_pair(3, 5));
  EXPECT_EQ(dcp_counts(parse_config("[learner]\nt_min_frac = 0\nt_max_frac = 0.49\n", "l.toml").learner),
            std::make_pair(0, 3));
  EXPECT_EQ(dcp_counts(c.learner), std::make_pair(2, 3));
  EXPECT_NE(error_of("[learner]\nt_min = 2\nt_min_frac = 0.5\n").find("not both"), std::string::npos);
  EXPECT_NE(error_of("[learner]\nt_max_frac = 1.5\n").find("'learner.t_max_frac'"), std::string::npos);
  EXPECT_NE(error_of("[learner]\ngroup_size = 2\nt_min_frac = 0.6\nt_max_frac = 0.9\n").find("holds no failure count"),
            std::string::npos);
  EXPECT_NE(error_of("[learner]\nadvantage_norm = \"z\"\n").find("unknown normalisation"), std::string::npos);
  // All-failed groups are hopeless unless refine_all_failed: a range that holds only G failures is empty.
  EXPECT_FALSE(parse_config("", "l.toml").learner.refine_all_failed);
  EXPECT_NE(error_of("[learner]\ngroup_size = 4\nt_min = 4\n").find("refine_all_failed"), std::string::npos);
  EXPECT_TRUE(parse_config("[learner]\ngroup_size = 4\nt_min = 4\nrefine_all_failed = true\n", "l.toml").learner.refine_all_failed);
  EXPECT_EQ(parse_config("[learner]\nadvantage_baseline = \"turn\"\nreward = \"trloo\"\n", "l.toml").learner.advantage_baseline, "turn");
  EXPECT_NE(error_of("[learner]\nadvantage_baseline = \"cohort\"\n").find("'learner.advantage_baseline'"), std::string::npos);
  EXPECT_NE(error_of("[learner]\nreward = \"kevin\"\nadvantage_baseline = \"turn\"\n").find("not kevin"), std::string::npos);
  EXPECT_EQ(parse_config("[eval]\ncall_limit_ratio = 0\n", "e.toml").eval.call_limit_ratio, 0);  // off
  EXPECT_NE(error_of("[eval]\ncall_limit_ratio = 0.5\n").find("'eval.call_limit_ratio'"), std::string::npos);
  EXPECT_NE(error_of("[bench]\ntarget = 1.5\n").find("'bench.target'"), std::string::npos);
  EXPECT_NE(error_of("[bench]\nseeds = 0\n").find("'bench.seeds'"), std::string::npos);
  EXPECT_EQ(parse_config("[bench]\nheld_out_tasks = [\"relu\", \"silu\"]\n", "b.toml").bench.held_out_tasks,
            (std::vector<std::string>{"relu", "silu"}));
  EXPECT_NE(error_of("[bench]\nheld_out_tasks = \"relu\"\n").find("'bench.held_out_tasks'"), std::string::npos);
  auto lm = parse_config("[policy]\nkind = \"lm\"\nmodel = \"m\"\ndevice = \"cuda:1\"\ndtype = \"bfloat16\"\n", "p.toml").policy;
  EXPECT_EQ(lm.device, "cuda:1");
  EXPECT_EQ(lm.dtype, "bfloat16");
  EXPECT_EQ(parse_config("", "p.toml").policy.dtype, "auto");
  EXPECT_NE(error_of("[policy]\ndevice = \"gpu\"\n").find("'policy.device': must be cpu, cuda or cuda:N"), std::string::npos);
  EXPECT_NE(error_of("[policy]\ndevice = \"cuda:x\"\n").find("'policy.device'"), std::string::npos);
  EXPECT_NE(error_of("[policy]\ndtype = \"int8\"\n").find("'policy.dtype'"), std::string::npos);
  EXPECT_NE(error_of("[learner]\nreward = \"dense\"\n").find("unknown reward 'dense'"), std::string::npos);
  EXPECT_NE(error_of("[learner]\nt_min = 5\nt_max = 4\n").find("'learner.t_max'"), std::string::npos);
  EXPECT_EQ(parse_config("[run]\nmax_staleness = 2\n", "p.toml").run.max_staleness, 2);
  EXPECT_FALSE(parse_config("", "p.toml").eval.profile);  // profiling is asked for
  EXPECT_TRUE(parse_config("[eval]\nprofile = true\n", "p.toml").eval.profile);
  EXPECT_NE(error_of("[eval]\nprofile = 1\n").find("'eval.profile'"), std::string::npos);
  EXPECT_DOUBLE_EQ(parse_config("", "p.toml").eval.slow_stop_ratio, 2);
  EXPECT_NE(error_of("[run]\nmax_staleness = -1\n").find("'run.max_staleness': must be >= 0"), std::string::npos);
  EXPECT_NE(error_of("[run]\nmax_staleness = 9\n").find("'run.max_staleness': must be at most 8"), std::string::npos);
  EXPECT_NE(error_of("[compile]\nnice = 20\n").find("'compile.nice': must be 0-19"), std::string::npos);
  EXPECT_NE(error_of("[compile]\nnice = -1\n").find("'compile.nice': must be >= 0"), std::string::npos);
  EXPECT_NE(error_of("[policy]\nbehaviour_weight_cap = 0.5\n").find("'policy.behaviour_weight_cap'"), std::string::npos);
}

TEST(Config, BadValuesNameFileLineAndKey) {
  auto e = error_of("[eval]\ntrials = 0\n");
  EXPECT_NE(e.find("leap.toml:"), std::string::npos) << e;
  EXPECT_NE(e.find("'eval.trials': must be > 0"), std::string::npos) << e;
  e = error_of("[sandbox]\ndeadline = 3\n");
  EXPECT_NE(e.find("leap.toml:2: field 'sandbox.deadline': unknown field"), std::string::npos) << e;
  e = error_of("[eval]\nmin_samples = 50\nmax_samples = 10\n");
  EXPECT_NE(e.find("max_samples"), std::string::npos) << e;
  e = error_of("[compile]\ncxx_flags = \"-O2\"\n");
  EXPECT_NE(e.find("expected an array of strings"), std::string::npos) << e;
  EXPECT_NE(error_of("[[eval]]\n").find("expected a table"), std::string::npos);
  EXPECT_NE(error_of("[sandbox]\ngpus = -1\n").find("'sandbox.gpus'"), std::string::npos);
  EXPECT_NE(error_of("[memory]\nprompts = true\n").find("needs record = true"), std::string::npos);
  EXPECT_NE(error_of("[memory]\nrecord = true\nprompts = true\n").find("only the LM policy"), std::string::npos);
  EXPECT_NE(error_of("[policy]\nkind = \"lm\"\nmodel = \"m\"\nkl_coef = -1\n").find("'policy.kl_coef'"), std::string::npos);
  EXPECT_NE(error_of("[policy]\nkind = \"lm\"\nmodel = \"m\"\ngenerate_batch = 0\n").find("'policy.generate_batch'"),
            std::string::npos);
}
}  // namespace
}  // namespace leap


namespace leap {
namespace {

TEST(LaunchCheck, RolesAndWrongLaunches) {
  EXPECT_EQ(role_of(0), Role::coordinator);
  EXPECT_EQ(role_of(1), Role::learner);
  EXPECT_EQ(role_of(5), Role::worker);
  EXPECT_NO_THROW(check_launch(4, {}));
  try {
    check_launch(2, {});
    FAIL() << "a world of 2 accepted";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 3 ranks"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("srun --mpi=pmix"), std::string::npos);
  }
  try {
    check_launch(1, {"SLURM_NTASKS=4"});
    FAIL() << "srun without PMI accepted";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("every task would run as rank 0"), std::string::npos) << e.what();
  }
  // Before MPI_Init: a multi-task Slurm step needs a PMI in the environment.
  EXPECT_NO_THROW(check_launch_before_init({}));
  EXPECT_NO_THROW(check_launch_before_init({"SLURM_STEP_NUM_TASKS=1"}));
  EXPECT_NO_THROW(check_launch_before_init({"SLURM_STEP_NUM_TASKS=4", "PMIX_RANK=2"}));
  EXPECT_NO_THROW(check_launch_before_init({"SLURM_STEP_NUM_TASKS=4", "OMPI_COMM_WORLD_RANK=0"}));
  try {
    check_launch_before_init({"SLURM_STEP_NUM_TASKS=4", "SLURM_NTASKS=4"});
    FAIL() << "a 4-task step without PMI accepted";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("srun started 4 tasks without PMI"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--mpi=pmix"), std::string::npos) << e.what();
  }
}
}  // namespace
}  // namespace leap

namespace leap {
namespace {

// The configuration block of the README is a valid config whose values are the defaults.
TEST(Config, EveryShippedConfigParses) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::source_dir() + "/configs")) {
    if (e.path().extension() != ".toml") continue;
    EXPECT_NO_THROW(load_config(e.path().string())) << e.path();
    ++n;
  }
  EXPECT_GE(n, 5u);
  EXPECT_EQ(load_config(test::source_dir() + "/configs/lm-shaped-cuda.toml").policy.device, "cuda");
}

TEST(Config, ReadmeExampleParsesToTheDefaults) {
  std::ifstream in(test::source_dir() + "/README.md");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  size_t at = text.find("### Configuration");
  ASSERT_NE(at, std::string::npos);
  size_t open = text.find("```toml\n", at), close = text.find("```", open + 8);
  ASSERT_NE(open, std::string::npos);
  LeapConfig c = parse_config(text.substr(open + 8, close - open - 8), "README.md");
  LeapConfig d;
  EXPECT_EQ(c.compile.nvrtc, d.compile.nvrtc);
  EXPECT_EQ(c.compile.nvcc_flags, d.compile.nvcc_flags);
  EXPECT_EQ(c.compile.cuda_arch, d.compile.cuda_arch);
  EXPECT_EQ(c.sandbox.deadline_s, d.sandbox.deadline_s);
  EXPECT_EQ(dcp_counts(c.learner), dcp_counts(d.learner));
  EXPECT_EQ(c.learner.advantage_norm, d.learner.advantage_norm);
  EXPECT_EQ(c.eval.call_limit_ratio, d.eval.call_limit_ratio);
  EXPECT_EQ(c.eval.call_limit_floor_ms, d.eval.call_limit_floor_ms);
  EXPECT_EQ(c.eval.require_custom_kernel, d.eval.require_custom_kernel);
  EXPECT_EQ(c.bench.target, d.bench.target);
  EXPECT_EQ(c.bench.seeds, d.bench.seeds);
  EXPECT_EQ(c.bench.eval_every, d.bench.eval_every);
  EXPECT_EQ(c.sandbox.cuda_connections, d.sandbox.cuda_connections);
  EXPECT_EQ(c.serve.bind, d.serve.bind);
  EXPECT_EQ(c.serve.port, d.serve.port);
  EXPECT_EQ(c.serve.queue_limit, d.serve.queue_limit);
  EXPECT_EQ(c.serve.max_body_mb, d.serve.max_body_mb);
  EXPECT_EQ(c.serve.threads, d.serve.threads);
  EXPECT_EQ(c.serve.cache, d.serve.cache);
  EXPECT_EQ(c.serve.max_trials, d.serve.max_trials);
  EXPECT_EQ(c.memory.context, d.memory.context);
  EXPECT_EQ(c.memory.budget_tokens, d.memory.budget_tokens);
  EXPECT_EQ(c.memory.improvement, d.memory.improvement);
  EXPECT_EQ(c.memory.slight_regression, d.memory.slight_regression);
  EXPECT_EQ(c.run.max_staleness, d.run.max_staleness);
  EXPECT_EQ(c.policy.behaviour_weight_cap, d.policy.behaviour_weight_cap);
  EXPECT_EQ(c.memory.rank_gamma, d.memory.rank_gamma);
  EXPECT_EQ(c.memory.confidence_k, d.memory.confidence_k);
  EXPECT_EQ(c.memory.hot_cases, d.memory.hot_cases);
}

TEST(Config, MemorySection) {
  auto c = parse_config("[memory]\npath = \"/tmp/m.db\"\ncontext = \"passive\"\nbudget_tokens = 512\nimprovement = 1.1\n", "leap.toml");
  EXPECT_EQ(c.memory.path, "/tmp/m.db");
  EXPECT_EQ(c.memory.context, "passive");
  EXPECT_EQ(c.memory.budget_tokens, 512);
  EXPECT_EQ(c.memory.improvement, 1.1);
  EXPECT_NE(error_of("[memory]\ncontext = \"all\"\n").find("unknown context 'all'"), std::string::npos);
  EXPECT_NE(error_of("[memory]\nimprovement = 0.9\n").find("improvement"), std::string::npos);
  EXPECT_NE(error_of("[memory]\nslight_regression = 1.5\n").find("slight_regression"), std::string::npos);
  EXPECT_NE(error_of("[memory]\nbudget_tokens = -1\n").find("budget_tokens"), std::string::npos);
  EXPECT_NE(error_of("[memory]\ntiers = 3\n").find("tiers"), std::string::npos);
}

TEST(Config, ServeSection) {
  auto c = parse_config("[serve]\nport = 0\nbackend = \"cuda\"\nqueue_limit = 8\ncache = false\ntoken = \"t\"\n", "leap.toml");
  EXPECT_EQ(c.serve.port, 0);
  EXPECT_EQ(c.serve.backend, "cuda");
  EXPECT_EQ(c.serve.queue_limit, 8);
  EXPECT_FALSE(c.serve.cache);
  EXPECT_EQ(c.serve.token, "t");
  EXPECT_NE(error_of("[serve]\nport = 70000\n").find("port"), std::string::npos);
  EXPECT_NE(error_of("[serve]\nbackend = \"tpu\"\n").find("unknown backend 'tpu'"), std::string::npos);
  EXPECT_NE(error_of("[serve]\nqueue_limit = 0\n").find("queue_limit"), std::string::npos);
  EXPECT_NE(error_of("[serve]\nthreads = 2\n").find("threads"), std::string::npos);
  EXPECT_NE(error_of("[serve]\nhost = \"x\"\n").find("host"), std::string::npos);
}
TEST(Config, JudgesAreSpreadOverTheGpusTheProcessSees) {
  using V = std::vector<int>;
  // gpus = 0: the visible GPUs; two judges on a one-GPU machine share GPU 0 (not GPU 1, which
  // does not exist: every start of that judge failed).
  EXPECT_EQ(evaluator_gpus(2, 0, 1), (V{0, 0}));
  EXPECT_EQ(evaluator_gpus(3, 0, 2), (V{0, 1, 0}));
  EXPECT_EQ(evaluator_gpus(2, 0, 8), (V{0, 1}));
  EXPECT_EQ(evaluator_gpus(4, 2, 8), (V{0, 1, 0, 1}));
  EXPECT_EQ(evaluator_gpus(2, 0, 0), (V{0, 1}));  // nothing visible to count: one GPU per judge
  try {
    evaluator_gpus(2, 2, 1);
    ADD_FAILURE() << "gpus beyond the visible ones accepted";
  } catch (const LeapError& e) {
    EXPECT_NE(std::string(e.what()).find("sees 1 GPU"), std::string::npos) << e.what();
  }
}


}  // namespace
}  // namespace leap

namespace leap {
namespace {

TEST(Config, TheRunnerSparesDefaultIsTheGpusTwelveSharedOutOrTwoOnTheCpu) {
  SandboxConfig s;
  EXPECT_EQ(runner_spares(s, false), 2);
  EXPECT_EQ(runner_spares(s, true), 12);
  EXPECT_EQ(runner_spares(s, true, 2, 1), 6);   // two judges on one GPU
  EXPECT_EQ(runner_spares(s, true, 8, 1), 4);   // at least 4 each
  EXPECT_EQ(runner_spares(s, true, 2, 2), 12);  // a GPU each
  s.runner_spares = 5;
  EXPECT_EQ(runner_spares(s, true, 8, 1), 5);   // as configured
  EXPECT_EQ(runner_spares(s, false), 5);
}

}  // namespace
}  // namespace leap
