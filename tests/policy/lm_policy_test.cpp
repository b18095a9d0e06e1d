// The language-model policy on the tiny Qwen2 fixture (its answers are noise; what is tested is
// the policy's own machinery): a worker's batched generation equals generating each rollout
// alone, and the KL term to the initial weights holds the policy near them.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/weight_channel.h"
#include "lm/safetensors.h"
#include "lm/sft.h"
#include "lm/tokenizer.h"
#include "policy/policy.h"
#include "prompt/prompt.h"
#include "prompt/verdict.h"
#include "support/builtin_tasks.h"
#include "support/test_util.h"
#include "tasks/task.h"

namespace leap {
namespace {

PolicyConfig lm_config(double kl_coef = 0, const char* dtype = "auto") {
  PolicyConfig c;
  c.dtype = dtype;
  c.kind = "lm";
  c.model = test::source_dir() + "/tests/fixtures/lm/tiny-qwen2";
  c.max_new_tokens = 12;
  c.generate_batch = 3;  // 5 requests: batches of 3 and 2
  c.lr = 1e-3;
  c.kl_coef = kl_coef;
  return c;
}

// A generation as an on-policy training sample with `advantage` (no staleness, no recorded
// behaviour log-probabilities).
TrainSample sample_of(const Generation& g, double advantage) {
  TrainSample t;
  t.context = g.context;
  t.actions = g.actions;
  t.logprob = g.logprob;
  t.advantage = advantage;
  return t;
}

using test::builtin_task;

TEST(LmPolicy, ABatchOfRolloutsGeneratesWhatEachWouldAlone) {
  auto policy = make_policy(lm_config(), 1);
  const Task* relu = builtin_task("relu");
  const Task* softmax = builtin_task("softmax");
  ASSERT_TRUE(relu && softmax);
  std::vector<GenerateRequest> reqs;
  for (uint64_t seed : {3, 4}) reqs.push_back({relu, Backend::cpu, {}, seed});
  reqs.push_back({softmax, Backend::cpu, {}, 5});
  PolicyContext second;  // a turn 2 after a first answer, with leap's verdict
  second.turn = 2;
  second.prev_actions = {10, 20, 30};
  second.prev_status = Status::compile_error;
  second.prev_feedback = "no fenced code block";
  reqs.push_back({relu, Backend::cpu, second, 6});
  PolicyContext greedy;
  greedy.greedy = true;
  reqs.push_back({softmax, Backend::cpu, greedy, 7});
  auto batch = policy->generate_batch(reqs);
  ASSERT_EQ(batch.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto alone = policy->generate(*reqs[i].task, reqs[i].backend, reqs[i].ctx, reqs[i].seed);
    EXPECT_EQ(batch[i].context, alone.context) << i;
    EXPECT_EQ(batch[i].actions, alone.actions) << i;
    EXPECT_NEAR(batch[i].logprob, alone.logprob, 1e-3) << i;
    EXPECT_EQ(batch[i].error, alone.error) << i;
  }
  EXPECT_NE(batch[0].actions, batch[1].actions);  // another seed, another answer
  EXPECT_GT(batch[3].context.size(), batch[0].context.size() + 3);  // the previous answer and verdict
}

// `leap sft --refine`'s second-turn example is, token for token, the context the policy builds for
// turn 2 after that answer and verdict (whether or not the answer ended with its end token), and
// only the completion after it is trained.
TEST(LmPolicy, ASecondTurnSftExampleIsThePolicysTurnTwoContext) {
  auto policy = make_policy(lm_config(), 1);
  const Task* relu = builtin_task("relu");
  ASSERT_TRUE(relu);
  lm::Tokenizer tok(lm_config().model + "/tokenizer.json");
  const std::string answer = "```cpp\nint leap_kernel(const DLTensor* in, int n, DLTensor* out, int m, void* s) {}\n```";
  const std::string completion = "```cpp\n#include <leap/schedule/relu.h>\n```";
  const Status status = Status::wrong_answer;
  const std::string feedback = "output 0: 12 of 4096 elements differ; first at index 7";
  auto ex = lm::make_refine_example(tok, prompt::task_prompt(*relu, Backend::cpu), answer,
                                    prompt::verdict_turn(status, feedback, false), completion, 1 << 20);
  auto end = tok.encode("<|im_end|>");
  ASSERT_EQ(end.size(), 1u);
  for (bool closed : {true, false}) {
    PolicyContext ctx;
    ctx.turn = 2;
    for (auto id : tok.encode(answer)) ctx.prev_actions.push_back(static_cast<int32_t>(id));
    if (closed) ctx.prev_actions.push_back(static_cast<int32_t>(end[0]));
    ctx.prev_status = status;
    ctx.prev_feedback = feedback;
    auto context = policy->generate(*relu, Backend::cpu, ctx, 1).context;
    ASSERT_LT(context.size(), ex.ids.size());
    EXPECT_EQ(std::vector<int64_t>(context.begin(), context.end()),
              std::vector<int64_t>(ex.ids.begin(), ex.ids.begin() + static_cast<std::ptrdiff_t>(context.size())))
        << "closed " << closed;
    for (size_t i = 0; i < ex.ids.size(); ++i) EXPECT_EQ(ex.train[i], i >= context.size() ? 1 : 0) << i;
    EXPECT_EQ(tok.decode(std::vector<int64_t>(ex.ids.begin() + static_cast<std::ptrdiff_t>(context.size()), ex.ids.end())),
              completion + "<|im_end|>");
  }
}

// The same samples, a positive advantage, several updates: with a KL weight the policy moves
// less from its initial weights (the KL each update reports, measured before it, is smaller).
TEST(LmPolicy, TheKlTermKeepsThePolicyNearItsInitialWeights) {
  const Task* relu = builtin_task("relu");
  ASSERT_TRUE(relu);
  auto kl_after = [&](double coef) {
    auto c = lm_config(coef);
    c.lr = 3e-3;
    auto policy = make_policy(c, 1);
    std::vector<TrainSample> batch;
    for (uint64_t seed : {1, 2}) {
      auto g = policy->generate(*relu, Backend::cpu, {}, seed);
      batch.push_back(sample_of(g, seed == 1 ? 1.0 : -1.0));
    }
    std::vector<double> kls;
    for (int i = 0; i < 5; ++i) kls.push_back(policy->train(batch).kl);
    EXPECT_EQ(kls[0], 0.0);  // the first update starts at the initial weights
    return kls.back();
  };
  const double loose = kl_after(1e-6), tight = kl_after(5.0);
  EXPECT_GT(loose, 0.0);
  EXPECT_LT(tight, 0.5 * loose) << "loose " << loose << ", tight " << tight;
  auto no_kl = make_policy(lm_config(0), 1);
  auto g = no_kl->generate(*relu, Backend::cpu, {}, 1);
  EXPECT_EQ(no_kl->train({sample_of(g, 1.0)}).kl, 0.0);  // kl_coef 0: none kept
}

// The learner forwards a micro-batch of sequences as one right-padded batch: with prompts and
// answers of different lengths, training in micro-batches of 4 gives the log-probabilities, loss,
// KL and weights of one sequence at a time.
TEST(LmPolicy, MicroBatchesOfPaddedSequencesTrainAsOneSequenceAtATime) {
  std::vector<TrainSample> batch;
  {
    auto gen = make_policy(lm_config(), 1);
    uint64_t seed = 1;
    for (const char* name : {"relu", "softmax", "layer_norm", "matmul", "relu"}) {
      const Task* t = builtin_task(name);
      ASSERT_TRUE(t) << name;
      auto g = gen->generate(*t, Backend::cpu, {}, seed);
      if (seed % 2 == 0 && g.actions.size() > 3) g.actions.resize(g.actions.size() / 2);  // answers of other lengths
      batch.push_back(sample_of(g, seed % 3 == 0 ? -1.0 : 0.5 * static_cast<double>(seed)));
      ++seed;
    }
  }
  std::set<size_t> prompt_lengths, answer_lengths;
  for (const auto& s : batch) prompt_lengths.insert(s.context.size()), answer_lengths.insert(s.actions.size());
  ASSERT_GE(prompt_lengths.size(), 3u);
  ASSERT_GE(answer_lengths.size(), 2u);
  auto trained = [&](int micro_batch) {
    auto c = lm_config(0.1);
    c.micro_batch = micro_batch;
    c.epochs = 2;
    auto p = make_policy(c, 1);
    std::vector<TrainStats> st;
    for (int i = 0; i < 2; ++i) st.push_back(p->train(batch));
    return std::make_pair(st, p->weights());
  };
  const auto [alone, w1] = trained(1);
  const auto [batched, w4] = trained(4);
  const auto initial = make_policy(lm_config(), 1)->weights();
  ASSERT_EQ(w1.size(), w4.size());
  // In L2 over all weights: Adam's update is nearly a sign for a weight whose gradient is ~0, so
  // the summation order of micro-batches can flip a few such weights by a full step (seen: 9e-6
  // of 4e-3 on one CPU); the update as a whole must be the same.
  double moved = 0, apart = 0;
  for (size_t i = 0; i < w1.size(); ++i)
    moved += std::pow(w1[i] - initial[i], 2), apart += std::pow(w1[i] - w4[i], 2);
  moved = std::sqrt(moved), apart = std::sqrt(apart);
  EXPECT_GT(moved, 1e-2);
  EXPECT_LT(apart, 1e-3 * moved) << "moved " << moved;
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_NEAR(alone[i].entropy, batched[i].entropy, 1e-4 * std::abs(alone[i].entropy)) << i;
    EXPECT_NEAR(alone[i].loss, batched[i].loss, 1e-4 * std::abs(alone[i].loss) + 1e-7) << i;
    EXPECT_NEAR(alone[i].kl, batched[i].kl, 1e-3 * alone[i].kl + 1e-9) << i;
    EXPECT_EQ(alone[i].samples, batch.size());
  }
  EXPECT_GT(alone[1].kl, 0.0);
}

// A sequence with advantage 0 (a group whose rollouts all tied) is not forwarded when there is
// no KL term: the weights and statistics are those of forwarding it with a negligible advantage
// (same normalisation), and with a KL term every sequence is forwarded.
TEST(LmPolicy, ZeroAdvantageSequencesAreNotForwardedAndChangeNothing) {
  std::vector<TrainSample> batch;
  {
    auto gen = make_policy(lm_config(), 1);
    uint64_t seed = 1;
    for (const char* name : {"relu", "softmax", "layer_norm", "matmul", "silu", "gelu"}) {
      const Task* t = builtin_task(name);
      ASSERT_TRUE(t) << name;
      auto g = gen->generate(*t, Backend::cpu, {}, seed);
      batch.push_back(sample_of(g, seed % 2 == 0 ? 0.0 : (seed == 3 ? -1.0 : 1.0)));
      ++seed;
    }
  }
  auto trained = [&](const std::vector<TrainSample>& b, double kl_coef) {
    auto c = lm_config(kl_coef);
    c.micro_batch = 2;
    auto p = make_policy(c, 1);
    std::vector<TrainStats> st;
    for (int i = 0; i < 2; ++i) st.push_back(p->train(b));
    return std::make_pair(st, p->weights());
  };
  auto nearly = batch;
  for (auto& s : nearly)
    if (s.advantage == 0) s.advantage = 1e-30;
  const auto [skipped, w_skipped] = trained(batch, 0);
  const auto [forwarded, w_forwarded] = trained(nearly, 0);
  EXPECT_EQ(skipped[0].samples, 6u);
  EXPECT_EQ(skipped[0].trained, 3u);
  EXPECT_EQ(forwarded[0].trained, 6u);
  const auto initial = make_policy(lm_config(), 1)->weights();
  // Over the whole update, as above (Adam makes a rounding difference in a near-zero gradient a step).
  double moved = 0, apart = 0;
  for (size_t i = 0; i < w_skipped.size(); ++i)
    moved += std::pow(w_skipped[i] - initial[i], 2), apart += std::pow(w_skipped[i] - w_forwarded[i], 2);
  moved = std::sqrt(moved), apart = std::sqrt(apart);
  EXPECT_GT(moved, 1e-2);
  EXPECT_LT(apart, 1e-3 * moved) << "moved " << moved;
  for (size_t i = 0; i < skipped.size(); ++i) {
    EXPECT_NEAR(skipped[i].entropy, forwarded[i].entropy, 1e-4 * std::abs(skipped[i].entropy)) << i;
    EXPECT_NEAR(skipped[i].loss, forwarded[i].loss, 1e-4 * std::abs(skipped[i].loss) + 1e-7) << i;
  }
  EXPECT_EQ(trained(batch, 0.1).first[0].trained, 6u);  // the KL term concerns every sequence
}

// A gradient that is not finite (a NaN advantage) takes no step, in fp32 and through bf16's masters,
// and says so; the same batch with a finite advantage then trains.
TEST(LmPolicy, ANonFiniteGradientTakesNoStepAndSaysSo) {
  const Task* relu = builtin_task("relu");
  ASSERT_TRUE(relu);
  for (const char* dtype : {"float32", "bfloat16"}) {
    auto p = make_policy(lm_config(0, dtype), 1);
    std::vector<TrainSample> batch = {sample_of(p->generate(*relu, Backend::cpu, {}, 1), std::nan("")),
                                      sample_of(p->generate(*relu, Backend::cpu, {}, 2), 1.0)};
    const auto before = p->weights();
    std::string error;
    try { p->train(batch); } catch (const LeapError& e) { error = e.what(); }
    EXPECT_NE(error.find("gradient is not finite"), std::string::npos) << dtype << ": " << error;
    EXPECT_TRUE(p->weights() == before) << dtype << ": the refused update moved weights";
    batch[0].advantage = -1.0;
    p->train(batch);
    const auto w = p->weights();
    EXPECT_TRUE(w != before && std::all_of(w.begin(), w.end(), [](float x) { return std::isfinite(x); })) << dtype;
  }
}

// Rollouts sampled at temperature 0.6 with top-p 0.9 are scored by training under that same
// distribution: the recomputed behaviour log-probabilities equal the recorded ones. A learner that
// scored them at temperature 1 (the off-policy bug) is caught by the same statistic.
TEST(LmPolicy, TrainingScoresTokensUnderTheDistributionTheyWereSampledFrom) {
  auto c = lm_config();
  c.temperature = 0.6;
  c.top_p = 0.9;
  c.max_new_tokens = 16;
  std::vector<TrainSample> batch;
  {
    auto gen = make_policy(c, 1);
    uint64_t seed = 11;
    for (const char* name : {"relu", "softmax", "layer_norm", "matmul"}) {
      auto g = gen->generate(*builtin_task(name), Backend::cpu, {}, seed++);
      ASSERT_FALSE(g.actions.empty());
      batch.push_back(sample_of(g, 1.0));
    }
  }
  const auto on_policy = make_policy(c, 1)->train(batch);
  EXPECT_LT(on_policy.behaviour_gap, 1e-3);
  auto tempered_only = c;
  tempered_only.top_p = 1.0;
  auto untempered = c;
  untempered.temperature = 1.0;
  EXPECT_GT(make_policy(untempered, 1)->train(batch).behaviour_gap, 0.1);
  EXPECT_GT(make_policy(tempered_only, 1)->train(batch).behaviour_gap, 1e-2);
}

// A stale sample ([run] max_staleness) is weighted per token by pi_current / pi_behaviour,
// truncated at behaviour_weight_cap. A fresh sample is trained on-policy whatever its recorded
// per-token log-probabilities; a stale one whose behaviour equals the current weights trains the
// same (weight 1); a stale one sampled by other weights trains differently, and the weight is
// bounded by the cap.
TEST(LmPolicy, StaleSamplesAreWeightedByTheirTruncatedBehaviourRatioAndFreshOnesAreOnPolicy) {
  const Task* relu = builtin_task("relu");
  ASSERT_TRUE(relu);
  auto c = lm_config();
  c.lr = 3e-3;
  c.max_new_tokens = 12;
  std::vector<TrainSample> fresh;
  {
    auto gen = make_policy(c, 1);
    for (uint64_t seed : {5, 6, 7}) {
      auto g = gen->generate(*relu, Backend::cpu, {}, seed);
      ASSERT_EQ(g.token_logprobs.size(), g.actions.size());
      fresh.push_back({g.context, g.actions, g.logprob, seed == 6 ? -1.0 : 1.0, 0, g.token_logprobs});
    }
  }
  auto trained = [&](const std::vector<TrainSample>& batch, TrainStats* st = nullptr) {
    auto p = make_policy(c, 1);
    auto s = p->train(batch);
    if (st) *st = s;
    return p->weights();
  };
  auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
    return d;
  };
  const std::vector<float> on_policy = trained(fresh), initial = make_policy(c, 1)->weights();
  const double step_size = max_diff(on_policy, initial);
  ASSERT_GT(step_size, 0);
  auto garbled = fresh;  // fresh samples: the recorded per-token values play no part
  for (auto& b : garbled)
    for (auto& lp : b.token_logprobs) lp -= 3.0f;
  EXPECT_EQ(trained(garbled), on_policy);

  auto stale_same = fresh;  // stale, but sampled by these very weights: weight 1
  for (auto& b : stale_same) b.staleness = 1;
  TrainStats st;
  // (weight 1 up to the float gap between recorded and recomputed log-probabilities)
  EXPECT_LT(max_diff(trained(stale_same, &st), on_policy), 0.01 * step_size);
  EXPECT_EQ(st.stale, 3u);
  EXPECT_NEAR(st.stale_weight, 1.0, 1e-3);

  // Older weights found the first sample's tokens less likely (e^3 more likely now: cut at the
  // cap); the others as now. Its tokens weigh more than the rest (Adam is blind to a uniform scale).
  auto stale_other = stale_same;
  for (auto& lp : stale_other[0].token_logprobs) lp -= 3.0f;
  EXPECT_GT(max_diff(trained(stale_other, &st), on_policy), 0.1 * step_size);
  const double n0 = static_cast<double>(fresh[0].actions.size()),
               n = n0 + static_cast<double>(fresh[1].actions.size() + fresh[2].actions.size());
  EXPECT_NEAR(st.stale_weight, (n0 * c.behaviour_weight_cap + (n - n0)) / n, 1e-3);
  EXPECT_LT(st.behaviour_gap, 1e-9) << "the gap statistic is over fresh samples only";
}

// The learner's updated weights reach a worker's replica as named tensors, bucket by bucket, in
// place: afterwards both generate the same answers and their checksums agree.
TEST(LmPolicy, NamedTensorsBroadcastInBucketsMakeTheReplicaTheLearners) {
  const Task* relu = builtin_task("relu");
  ASSERT_TRUE(relu);
  auto c = lm_config();
  c.lr = 3e-3;
  c.broadcast_bucket_mb = 1;  // the fixture's ~1.8 MB of fp32 weights: two buckets, tensors split
  auto learner = make_policy(c, 1), worker = make_policy(c, 1);
  auto g = learner->generate(*relu, Backend::cpu, {}, 1);
  learner->train({sample_of(g, 1.0)});
  ASSERT_NE(weights_checksum(learner->weights()), weights_checksum(worker->weights()));
  auto ts = learner->weight_tensors();
  ASSERT_FALSE(ts.empty());
  size_t bytes = 0;
  for (const auto& t : ts) bytes += t.bytes;
  InProcessWeightChannel ch(2);
  WeightSync got;
  std::thread w([&] { got = broadcast_policy_weights(*worker, ch, false); });
  const WeightSync sent = broadcast_policy_weights(*learner, ch, true);
  w.join();
  EXPECT_EQ(sent.bytes, bytes);
  EXPECT_EQ(sent.buckets, (bytes + (1u << 20) - 1) >> 20);
  EXPECT_GE(sent.buckets, 2u);
  EXPECT_EQ(got.checksum, sent.checksum);
  EXPECT_EQ(weights_checksum(worker->weights()), weights_checksum(learner->weights()));
  for (uint64_t seed : {2, 3}) {
    auto a = learner->generate(*relu, Backend::cpu, {}, seed), b = worker->generate(*relu, Backend::cpu, {}, seed);
    EXPECT_EQ(a.actions, b.actions) << seed;
    EXPECT_DOUBLE_EQ(a.logprob, b.logprob) << seed;
  }
}

// A bf16 model trains through fp32 masters: one step at a learning rate far below bf16's
// resolution moves the masters (the update is kept); the checkpoint carries them, so a policy
// loaded from it takes the next step exactly as the one that never stopped.
TEST(LmPolicy, Bf16TrainsThroughFp32MastersAndResumesExactly) {
  const Task* relu = builtin_task("relu");
  ASSERT_TRUE(relu);
  auto c = lm_config(0, "bfloat16");
  c.lr = 1e-6;
  auto a = make_policy(c, 1);
  for (const auto& t : a->weight_tensors()) ASSERT_EQ(t.dtype, WeightDtype::bf16) << t.name;
  auto sample = [&](uint64_t seed, double adv) {
    auto g = a->generate(*relu, Backend::cpu, {}, seed);
    return sample_of(g, adv);
  };
  const std::vector<TrainSample> first = {sample(1, 1.0), sample(2, -1.0)}, second = {sample(3, 1.0), sample(4, -1.0)};
  a->train(first);
  test::TempDir dir;
  a->save(dir.path() + "/ckpt");
  lm::SafetensorsModel initial(c.model), masters(dir.path() + "/ckpt/master-fp32"), saved(dir.path() + "/ckpt");
  size_t moved = 0, tensors = 0;
  for (const auto& name : initial.names()) {
    auto m = masters.tensor(name);
    ASSERT_EQ(m.scalar_type(), torch::kFloat32) << name;
    moved += !torch::equal(m, initial.tensor(name));
    EXPECT_TRUE(torch::equal(saved.tensor(name), m.to(torch::kBFloat16))) << name << ": the model is its masters rounded";
    ++tensors;
  }
  EXPECT_GT(moved, tensors / 2) << "a 1e-6 step must move the fp32 masters";
  auto b = make_policy(c, 1);
  b->load(dir.path() + "/ckpt");
  EXPECT_EQ(weights_checksum(b->weights()), weights_checksum(a->weights()));
  a->train(second);
  b->train(second);
  EXPECT_EQ(weights_checksum(b->weights()), weights_checksum(a->weights()));
  a->save(dir.path() + "/a2");
  b->save(dir.path() + "/b2");
  lm::SafetensorsModel ma(dir.path() + "/a2/master-fp32"), mb(dir.path() + "/b2/master-fp32");
  for (const auto& name : initial.names()) EXPECT_TRUE(torch::equal(ma.tensor(name), mb.tensor(name))) << name;
}

// A snapshot is the checkpoint of the moment it was taken: written after the policy has trained
// on, it resumes exactly as a save() at that moment does (the model, the fp32 masters of a bf16
// model and AdamW's moments and step count, which the next update reads). One taken while another
// is still unwritten gets memory of its own; a later one reuses the written one's.
TEST(LmPolicy, ASnapshotWrittenAfterFurtherTrainingIsTheCheckpointOfItsMoment) {
  const Task* relu = builtin_task("relu");
  ASSERT_TRUE(relu);
  for (const char* dtype : {"float32", "bfloat16"}) {
    SCOPED_TRACE(dtype);
    auto c = lm_config();
    c.dtype = dtype;
    auto a = make_policy(c, 1);
    std::vector<std::vector<TrainSample>> batches(4);
    for (uint64_t seed = 0; seed < 8; ++seed)
      batches[seed / 2].push_back(sample_of(a->generate(*relu, Backend::cpu, {}, seed + 1), seed % 2 ? -1.0 : 1.0));
    test::TempDir dir;
    auto loaded = [&](const std::string& sub) {
      auto p = make_policy(c, 1);
      p->load(dir.path() + "/" + sub);
      return p;
    };
    a->train(batches[0]);
    auto snap_a = a->snapshot();
    ASSERT_TRUE(snap_a);
    a->save(dir.path() + "/saved");
    const std::string at_a = weights_checksum(a->weights());
    a->train(batches[1]);
    auto snap_b = a->snapshot();  // while snap_a is unwritten
    const std::string at_b = weights_checksum(a->weights());
    ASSERT_NE(at_b, at_a);
    a->train(batches[2]);
    snap_a->write(dir.path() + "/a");
    snap_b->write(dir.path() + "/b");
    snap_a.reset();
    snap_b.reset();
    auto snap_c = a->snapshot();  // in snap_b's memory
    const std::string at_c = weights_checksum(a->weights());
    snap_c->write(dir.path() + "/c");

    auto from_a = loaded("a"), from_save = loaded("saved"), from_b = loaded("b"), from_c = loaded("c");
    EXPECT_EQ(weights_checksum(from_a->weights()), at_a);
    EXPECT_EQ(weights_checksum(from_b->weights()), at_b);
    EXPECT_EQ(weights_checksum(from_c->weights()), at_c);
    // The optimizer's state too: each continues exactly as the policy did from that moment.
    for (auto* p : {from_a.get(), from_save.get()}) p->train(batches[1]);
    from_b->train(batches[2]);
    EXPECT_EQ(weights_checksum(from_a->weights()), at_b);
    EXPECT_EQ(weights_checksum(from_save->weights()), at_b);
    EXPECT_EQ(weights_checksum(from_b->weights()), at_c);
    a->train(batches[3]);
    from_c->train(batches[3]);
    EXPECT_EQ(weights_checksum(from_c->weights()), weights_checksum(a->weights()));
    if (std::string(dtype) == "bfloat16") {
      lm::SafetensorsModel ms(dir.path() + "/a/master-fp32"), mv(dir.path() + "/saved/master-fp32");
      for (const auto& name : mv.names()) EXPECT_TRUE(torch::equal(ms.tensor(name), mv.tensor(name))) << name;
    }
  }
}

// The verdict the policy reads for a correct kernel: its speed, then its profile when the judge
// measured one ([eval] profile); without one, the speed alone.
TEST(Verdict, ACorrectKernelsProfileReachesThePolicy) {
  EvalOutcome o;
  o.task = "relu";
  o.status = Status::ok;
  o.speedup = 0.7;
  o.candidate_timing.median_us = 106;
  o.reference_timing.median_us = 74;
  const std::string plain = prompt::feedback_text(o);
  EXPECT_NE(plain.find("0.700x"), std::string::npos) << plain;
  o.feedback = "profile (Nsight Compute, one call: 1 kernel launch, 108.1 us): memory-bound";
  const std::string profiled = prompt::feedback_text(o);
  EXPECT_EQ(profiled.rfind(plain, 0), 0u) << profiled;
  EXPECT_NE(profiled.find("memory-bound"), std::string::npos) << profiled;
}

}  // namespace
}  // namespace leap
