# The wire vocabulary of leap: every message that crosses a process boundary.
@0xb3c1f2e4a5d60719;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("leap::proto");

enum Status {
  ok @0;
  compileError @1;
  runtimeError @2;
  timeout @3;
  wrongAnswer @4;
  cheatDetected @5;
  infraError @6;
}

enum Check {                    # the judge's check that decided a verdict (common/outcome.h)
  none @0;
  tooSlow @1;
  resourceExhaustion @2;
  forbiddenImport @3;
  forgedReply @4;
  inputMutation @5;
  outputReuse @6;
  partialWrite @7;
  skippedWork @8;
  streamEscape @9;
  threadsLeftRunning @10;
  timedCallWrong @11;
  timingForged @12;
  noCustomKernel @13;
  vendorLibrary @14;
}

enum Backend {
  cpu @0;
  cuda @1;
}

enum DType {
  float32 @0;
  float64 @1;
  float16 @2;
  bfloat16 @3;
  int32 @4;
  int64 @5;
}

struct Distribution {
  # normal: a=mean, b=std; uniform: [a, b); positive: |normal(a, b)| + 1e-3.
  kind @0 :Text;
  a @1 :Float64;
  b @2 :Float64;
}

struct TensorSpec {
  name @0 :Text;
  shape @1 :List(Int64);
  dtype @2 :DType;
  distribution @3 :Distribution;
  parameter @4 :Text;            # the reference module's parameter or buffer this input is ("" = random)
}

struct Param {
  name @0 :Text;
  value @1 :Float64;
}

struct Tolerance {
  dtype @0 :DType;
  atol @1 :Float64;
  rtol @2 :Float64;
}

struct TaskRef {
  # A task resolved for one backend: concrete shapes, everything the evaluator needs.
  name @0 :Text;
  level @1 :UInt8;
  reference @2 :Text;
  inputs @3 :List(TensorSpec);
  outputs @4 :List(TensorSpec);
  params @5 :List(Param);
  tolerances @6 :List(Tolerance);
  backend @7 :Backend;
  minSpeedup @8 :Float64;        # a correct kernel must be at least this fast vs the reference (0 = any)
  archive @9 :Text;              # reference = "torchscript": the module for this backend
  initInputs @10 :Text;          # KernelBench format: JSON array of Model(...)'s arguments at these sizes
}

enum CandidateFormat {
  leapAbi @0;      # one C/C++/CUDA source exporting leap_kernel, built into a library
  kernelbench @1;  # a Python module defining ModelNew (KernelBench's answer format)
}

struct Candidate {
  task @0 :Text;
  name @1 :Text;
  backend @2 :Backend;
  source @3 :Text;
}

struct EvalSettings {
  trials @0 :UInt32;
  seed @1 :UInt64;
  warmupCalls @2 :UInt32;
  minSamples @3 :UInt32;
  maxSamples @4 :UInt32;
  timingBudgetMs @5 :Float64;
  rseTarget @6 :Float64;
  speedupBound @7 :Float64;
  warmupMs @8 :Float64;
  deadlineS @9 :Float64;       # the judge ends a candidate's evaluation after this (timeout)
  verifiedTimedCalls @10 :UInt32; # timed calls verified, a uniform random sample, besides the last
  memoryMb @11 :UInt64;        # host memory a candidate's runner may use
  timingSlack @12 :Float64;    # judge wall may exceed runner timing + overhead by this fraction ...
  timingSlackUs @13 :Float64;  # ... or this much, whichever is larger
  callLimitRatio @14 :Float64; # a call running longer than this x the reference is stopped (0 = off) ...
  callLimitFloorMs @15 :Float64; # ... but never below this
  overBudgetSamples @16 :UInt32; # timed calls at least once the budget is spent (0: minSamples)
  preciseStopMs @17 :Float64;  # once the timed calls alone spent this, overBudgetSamples do if precise (0: off)
  maxFeedbackBytes @18 :UInt32; # feedback per record, cut on a UTF-8 boundary by the judge's client
  requireCustomKernel @19 :Bool = true; # KernelBench format: each audited call runs the answer's own kernel, no vendor-library operator
  slowStopRatio @20 :Float64;  # a candidate clearly this many times slower than its reference: timed to 5 % (0: off)
  profile @21 :Bool;           # an ok CUDA candidate's kernels profiled (Nsight Compute) after the verdict
}

struct TimingStats {
  medianUs @0 :Float64;
  meanUs @1 :Float64;
  stddevUs @2 :Float64;
  p10Us @3 :Float64;
  p90Us @4 :Float64;
  rse @5 :Float64;
  samples @6 :UInt32;
  totalUs @7 :Float64;
}

struct EvalRequest {
  id @0 :UInt64;
  task @1 :TaskRef;
  candidateName @2 :Text;
  libraryPath @3 :Text;
  settings @4 :EvalSettings;
  referenceTiming @5 :TimingStats;
  hasReferenceTiming @6 :Bool;
  format @7 :CandidateFormat;    # of the candidate at libraryPath (kernelbench: its Python source)
}

struct Trial {
  index @0 :UInt32;
  passed @1 :Bool;
  maxAbsError @2 :Float64;
  maxRelError @3 :Float64;
  firstBadIndex @4 :Int64;
  mismatches @5 :Int64;
}

struct StageTimes {
  # Microseconds spent in each stage of one candidate's evaluation.
  queueWaitUs @0 :Float64;
  compileUs @1 :Float64;
  loadUs @2 :Float64;
  correctnessUs @3 :Float64;
  timingUs @4 :Float64;
  evalUs @5 :Float64;
  totalUs @6 :Float64;
  candidateCallsUs @7 :Float64;  # inside the candidate's untimed calls (correctness checks)
  # Wall-clock spans (Unix seconds; 0 = not reached): the worker's timeline.
  compileStartS @8 :Float64;
  compileEndS @9 :Float64;
  evalStartS @10 :Float64;
  evalEndS @11 :Float64;
  runnerWaitUs @12 :Float64;     # waiting for a candidate runner to finish starting (0: a spare was ready)
  # Diagnostics of the load, as the runner reports them (untrusted; never part of a verdict).
  runnerMapUs @13 :Float64;      # mapping the judge's buffers (CUDA IPC open / mmap)
  runnerLibraryUs @14 :Float64;  # dlopen of the candidate, its constructors included
  keptVerifyUs @15 :Float64;     # verifying the kept timed calls once the runner is gone
  retiredWaitUs @16 :Float64;    # waiting for the previous candidate's runner to be gone
  gpuLockWaitUs @17 :Float64;    # waiting for the GPU's timing lock (judges sharing a GPU)
  runnerStartUs @18 :Float64;    # the taken runner's start as it reports it (process start to ready)
  compileHostUs @19 :Float64;    # the NVRTC split's host pass (summed over an answer's extensions)
  compileDeviceUs @20 :Float64;  # its device pass (NVRTC)
}

struct TurnOutcome {
  id @0 :UInt64;
  task @1 :Text;
  candidate @2 :Text;
  backend @3 :Backend;
  status @4 :Status;
  check @5 :Check;              # the check that decided it (with cheatDetected always)
  feedback @6 :Text;            # compiler diagnostics, mismatch report, crash context
  trials @7 :List(Trial);
  candidateTiming @8 :TimingStats;
  referenceTiming @9 :TimingStats;
  speedup @10 :Float64;
  speedupFlagged @11 :Bool;     # above the bound, re-verified on a second input set
  cacheHit @12 :Bool;
  stages @13 :StageTimes;
  recycleEvaluator @14 :Bool;   # the evaluator process must not be reused
  compiler @15 :Text;           # what built it: c++, nvcc, nvrtc; empty on a cache hit
  seed @16 :UInt64;             # the evaluation's input seed (reproduces every input set)
  calls @17 :UInt32;            # calls of the candidate, each on fresh inputs
  verifiedCalls @18 :UInt32;    # of those, compared with the reference
  wallExcessUs @19 :Float64;    # judge's wall clock minus the runner's timing minus calibrated overhead (median)
  trialCalls @20 :UInt32;       # correctness trials before timing (fewer than [eval] trials: timed calls carried the rest)
  kernels @21 :List(KernelProfile);  # [eval] profile: the kernels of one call, as Nsight Compute measured them
  bottleneck @22 :Text;         # the longest kernel's: memory-bound, compute-bound or latency-bound
  profileUs @23 :Float64;       # the profiling step's wall time (after the verdict; not in any timing)
  profileError @24 :Text;       # why no profile came back (the verdict stands)
  warmupCalls @25 :UInt32;      # untimed warm-up calls before the timed ones (none for a clearly slow candidate warm from its trials)
  nvrtcFallback @26 :Text;      # why the farm built CUDA code with nvcc instead of NVRTC ("" if it did not)
}

struct KernelProfile {
  kernel @0 :Text;              # its name as the profiler shows it (bounded)
  durationUs @1 :Float64;
  occupancyPct @2 :Float64;     # achieved: active warps over the SM's maximum
  dramPct @3 :Float64;          # DRAM throughput, % of peak
  memoryPct @4 :Float64;        # memory throughput (L1, L2, DRAM: the busiest), % of peak
  smPct @5 :Float64;            # SM (compute) throughput, % of peak
  registers @6 :UInt32;         # per thread
  sharedBytes @7 :UInt64;       # shared memory per block, static and dynamic
  block @8 :Text;               # "(256, 1, 1)"
  grid @9 :Text;
}

struct EvaldHello {
  pid @0 :Int32;
  backend @1 :Backend;
  abiVersion @2 :UInt32;
}

struct EvaldMessage {
  union {
    hello @0 :EvaldHello;
    outcome @1 :TurnOutcome;
  }
}

# ---- the RL loop (leap run): coordinator, learner and workers

struct PriorAttempt {           # a rollout's previous turn, the context of its refinement
  actions @0 :List(Int32);
  status @1 :Status;
  feedback @2 :Text;
  check @3 :Check;
}

struct RolloutWork {
  rollout @0 :UInt32;
  seed @1 :UInt64;              # fixes the rollout-turn's sample wherever it runs
  hasPrior @2 :Bool;
  prior @3 :PriorAttempt;
}

struct Assignment {             # coordinator -> worker
  step @0 :UInt32;
  group @1 :UInt64;
  task @2 :Text;
  turn @3 :UInt32;
  weightsVersion @4 :UInt64;
  rollouts @5 :List(RolloutWork);
}

struct GenerationRecord {       # what training needs of a generation
  context @0 :List(Int32);
  actions @1 :List(Int32);
  logprob @2 :Float64;
  summary @3 :Text;
  startS @4 :Float64;           # wall clock (Unix s) of the worker's generation batch
  endS @5 :Float64;
  memoryChars @6 :UInt32;       # of the experience memory's context in the prompt ([memory] prompts)
  decision @7 :Text;            # what the attempt sets out to do (answer prose, knob choices)
  tokenLogprobs @8 :List(Float32);  # behaviour log-probability per action (lm: per token; stale samples' importance weight)
}

struct RolloutResult {          # worker -> learner, one per scheduled rollout-turn
  step @0 :UInt32;
  group @1 :UInt64;
  rollout @2 :UInt32;
  turn @3 :UInt32;
  worker @4 :UInt32;
  weightsVersion @5 :UInt64;
  generation @6 :GenerationRecord;
  outcome @7 :TurnOutcome;
  source @8 :Text;              # the candidate as compiled (the experience memory keeps it)
}

struct WorkDone {               # worker -> coordinator, per batch of assignments
  worker @0 :UInt32;
  rollouts @1 :UInt32;
  generateS @2 :Float64;        # policy forward and rendering
  compileWaitS @3 :Float64;     # batch wall time not spent evaluating (compiles not hidden)
  compileCpuS @4 :Float64;      # compiler time of cache misses
  evaluateS @5 :Float64;
  cacheHits @6 :UInt32;
  compiles @7 :UInt32;
  step @8 :UInt32;              # the step of the batch's assignments (a batch holds one step's)
}

struct WorkProgress {           # worker -> coordinator, at most twice a second while a batch is worked on
  worker @0 :UInt32;
  generated @1 :UInt32;         # rollouts of the batch generated so far
  evaluated @2 :UInt32;         # and evaluated
}

struct GroupRef {
  group @0 :UInt64;
  task @1 :Text;
}

struct StepOpen {               # coordinator -> learner
  step @0 :UInt32;
  groups @1 :List(GroupRef);
}

struct Decision {               # learner -> coordinator: the next turn of a group
  step @0 :UInt32;
  group @1 :UInt64;
  turn @2 :UInt32;
  difficulty @3 :Text;
  rollouts @4 :List(RolloutWork);
}

struct StepResult {             # learner -> coordinator, after the update
  step @0 :UInt32;
  weightsVersion @1 :UInt64;
  rollouts @2 :UInt32;
  solvedBy @3 :List(UInt32);    # rollouts solved at turn <= t, t = 1..T
  easy @4 :UInt32;
  medium @5 :UInt32;
  hopeless @6 :UInt32;
  rewards @7 :List(Float64);    # one per rollout
  loss @8 :Float64;
  entropy @9 :Float64;
  learnS @10 :Float64;
  bookkeepingS @11 :Float64;
  outcomes @12 :UInt32;
  samples @13 :UInt32;
  kl @14 :Float64;              # mean per-token KL to the initial weights (0: not kept)
  loneSamples @15 :UInt32;      # samples alone at their turn in their group: the step's leave-one-out set their advantage
  staleness @16 :List(UInt32);  # the step's rollout-turns by staleness 0, 1, ... (weights versions behind the trained one)
  voided @17 :UInt32;           # groups none of whose turn-1 rollouts leap evaluated (all infra_error)
}

struct StepCollected {          # learner -> coordinator: every group of the step is final; its update starts
  step @0 :UInt32;
}

struct Sync {                   # coordinator -> learner and workers: broadcast the weights now
  step @0 :UInt32;
  weightsVersion @1 :UInt64;
  checkpointDir @2 :Text;       # learner: save policy and optimizer here after the broadcast
}

struct CheckpointWritten {      # learner -> coordinator: the checkpoint of step `step` is on disk
  step @0 :UInt32;
  dir @1 :Text;
  writeS @2 :Float64;           # the write, off the step's path (0: saved on it, see Synced.checkpointS)
}

struct Synced {                 # learner and workers -> coordinator
  rank @0 :UInt32;
  weightsVersion @1 :UInt64;
  checksum @2 :Text;
  broadcastS @3 :Float64;
  checkpointS @4 :Float64;     # the learner's: its checkpoint's time on the step's path (the copy it writes later, or the whole save)
}

struct Stop {
  reason @0 :Text;
}

struct MemoryQuery {            # worker -> learner: the memory's context for each rollout of a turn
  id @0 :UInt64;                # the worker's, echoed in the answer
  worker @1 :UInt32;
  step @2 :UInt32;
  rollouts @3 :List(MemoryQueryItem);
}

struct MemoryQueryItem {
  group @0 :UInt64;
  rollout @1 :UInt32;
  turn @2 :UInt32;              # the turn about to be generated (its previous turn is the predecessor)
  task @3 :Text;
}

struct MemoryContext {          # learner -> worker: one context per queried rollout, in order
  id @0 :UInt64;
  contexts @1 :List(MemoryContextItem);
}

struct MemoryContextItem {
  text @0 :Text;                # "" when the memory has nothing for it
  tokens @1 :UInt32;
}

struct LoopMessage {
  union {
    assignment @0 :Assignment;
    result @1 :RolloutResult;
    workDone @2 :WorkDone;
    stepOpen @3 :StepOpen;
    decision @4 :Decision;
    stepResult @5 :StepResult;
    sync @6 :Sync;
    synced @7 :Synced;
    stop @8 :Stop;
    memoryQuery @9 :MemoryQuery;
    memoryContext @10 :MemoryContext;
    progress @11 :WorkProgress;
    stepCollected @12 :StepCollected;
    checkpointWritten @13 :CheckpointWritten;
  }
}

# ---- leap serve across ranks: rank 0 (the HTTP front door) and evaluation workers (ranks >= 1)

struct ServeJob {               # front door -> worker
  id @0 :Text;
  task @1 :Text;
  name @2 :Text;
  source @3 :Text;
  settings @4 :EvalSettings;    # the request's resolved [eval] settings, all of them
  kernelbench @5 :Bool;         # the source is a KernelBench-format answer (ModelNew), not leap's ABI
}

struct ServeDone {              # worker -> front door
  id @0 :Text;
  rank @1 :UInt32;
  outcome @2 :TurnOutcome;
}

struct ServeHello {             # worker -> front door, every half second (its heartbeat)
  rank @0 :UInt32;
  evaluators @1 :UInt32;
  device @2 :Text;
}

struct ServeMessage {
  union {
    job @0 :ServeJob;
    done @1 :ServeDone;
    hello @2 :ServeHello;
    stop @3 :Stop;
  }
}
