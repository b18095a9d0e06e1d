#include "tasks/task_proto.h"

#include "common/outcome_proto.h"

namespace leap {

DType from_proto(proto::DType d) { return static_cast<DType>(static_cast<int>(d)); }
static proto::DType dtype_to_proto(DType d) { return static_cast<proto::DType>(static_cast<int>(d)); }

namespace {

void tensors_to_proto(const Task& t, Backend backend, const std::vector<TensorDecl>& decls,
                      capnp::List<proto::TensorSpec>::Builder list) {
  for (unsigned i = 0; i < decls.size(); ++i) {
    const auto& d = decls[i];
    auto b = list[i];
    b.setName(d.name);
    auto shape = t.shape(d, backend);
    auto sb = b.initShape(static_cast<unsigned>(shape.size()));
    for (unsigned k = 0; k < shape.size(); ++k) sb.set(k, shape[k]);
    b.setDtype(dtype_to_proto(d.dtype));
    auto dist = b.initDistribution();
    dist.setKind(d.distribution.kind);
    dist.setA(d.distribution.a);
    dist.setB(d.distribution.b);
    b.setParameter(d.parameter);
  }
}

}  // namespace

void to_proto(const Task& t, Backend backend, proto::TaskRef::Builder b) {
  b.setName(t.name);
  b.setLevel(static_cast<uint8_t>(t.level));
  b.setReference(t.reference);
  b.setBackend(to_proto(backend));
  b.setMinSpeedup(t.min_speedup_for(backend));
  b.setArchive(t.archive(backend));
  if (auto it = t.init_inputs.find(backend); it != t.init_inputs.end()) b.setInitInputs(it->second);
  tensors_to_proto(t, backend, t.inputs, b.initInputs(static_cast<unsigned>(t.inputs.size())));
  tensors_to_proto(t, backend, t.outputs, b.initOutputs(static_cast<unsigned>(t.outputs.size())));
  auto params = b.initParams(static_cast<unsigned>(t.params.size()));
  for (unsigned i = 0; i < t.params.size(); ++i) {
    params[i].setName(t.params[i].first);
    params[i].setValue(t.params[i].second);
  }
  const DType all[] = {DType::float32, DType::float64, DType::float16, DType::bfloat16, DType::int32, DType::int64};
  auto tols = b.initTolerances(6);
  for (unsigned i = 0; i < 6; ++i) {
    auto tol = t.tolerance(all[i]);
    tols[i].setDtype(dtype_to_proto(all[i]));
    tols[i].setAtol(tol.atol);
    tols[i].setRtol(tol.rtol);
  }
}

}  // namespace leap
