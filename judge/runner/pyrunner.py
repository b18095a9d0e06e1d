"""The Python runner: the disposable process a KernelBench-format candidate (a module defining
`ModelNew`) runs in. Started by the judge like leap-runner (bubblewrap, one candidate, then
killed); its channel, confinement and call timing are leap-runner's own (libleap-pyrunner.so,
through ctypes). Trusted until `load`: it imports what candidates use, so that a spare is ready
before a candidate comes. From `load` on this process is the candidate's: the judge believes
nothing it says.

Usage: python3 -I -B pyrunner.py LIBLEAP_PYRUNNER RUNNER_OPTIONS... [--zygote]

With --zygote the process imports once and forks a runner per request of the judge's (the
zygote never loads a candidate; each forked runner serves one and is killed as above). On CUDA
each runner makes its own context and device warm-up after the fork (a forked context is
unusable); on the CPU the warm-up is the zygote's, and a runner starts in milliseconds.
"""

import contextlib
import ctypes
import functools
import gc
import json
import linecache
import os
import sys
import time

VIEW = len(sys.argv) > 1 and sys.argv[1] == "--view"
CUDA = "--backend" in sys.argv and sys.argv[sys.argv.index("--backend") + 1] == "cuda"
DEVICE = int(sys.argv[sys.argv.index("--device") + 1]) if "--device" in sys.argv else 0
ZYGOTE = not VIEW and "--zygote" in sys.argv
CAPABILITY = int(sys.argv[sys.argv.index("--capability") + 1]) if "--capability" in sys.argv else 0
# True in the zygote itself (no device work, no GPU lock), false in the runners it forks.
_in_zygote = ZYGOTE

if not VIEW:
    core = ctypes.CDLL(sys.argv[1])
    _argv = [b"leap-pyrunner"] + [a.encode() for a in sys.argv[2:] if a != "--zygote"]
    (core.leap_pyr_zygote_start if ZYGOTE else core.leap_pyr_start)(len(_argv), (ctypes.c_char_p * len(_argv))(*_argv))
    core.leap_pyr_receive.restype = ctypes.c_int
    core.leap_pyr_receive.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32),
                                      ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    core.leap_pyr_map_and_confine.restype = ctypes.c_double
    core.leap_pyr_map_and_confine.argtypes = [ctypes.c_int]
    core.leap_pyr_view.restype = ctypes.c_void_p
    core.leap_pyr_view.argtypes = [ctypes.c_uint32, ctypes.c_int]
    core.leap_pyr_stream.restype = ctypes.c_void_p
    core.leap_pyr_end.argtypes = [ctypes.c_int, ctypes.c_char_p]
    core.leap_pyr_loaded.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_double, ctypes.c_double]
    core.leap_pyr_zygote_next.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int),
                                          ctypes.POINTER(ctypes.c_int)]
    core.leap_pyr_zygote_forked.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    core.leap_pyr_child.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype = ctypes.py_object
_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# One thread: the candidate gets one core (the reference is timed on one), and a thread pool
# started later would be a thread the judge did not count in the runner's baseline.
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"
# PyTorch 2's dispatch modes (the audit below) import its compiler stack, which makes its cache
# folder at import: one that exists, read-only in the sandbox (answers compile nothing).
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.dirname(os.path.abspath(__file__))
# Triton's backends from its own folder: it would otherwise look for them in its package metadata
# (entry points), outside the sandbox's view.
os.environ["TRITON_BACKENDS_IN_TREE"] = "1"
# The CPU backend runs Triton kernels in Triton's interpreter (the same kernels, on the judge's tensors).
if not CUDA:
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import torch.nn  # noqa: E402,F401
import torch.nn.functional  # noqa: E402,F401
import torch.utils.dlpack  # noqa: E402
import torch.utils.cpp_extension  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import math  # noqa: E402,F401

try:
    from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
except ImportError:
    TorchDispatchMode = object
if not hasattr(torch.Tensor, "untyped_storage"):  # PyTorch 1.x: what Triton's interpreter asks of a tensor
    torch.Tensor.untyped_storage = lambda self: self.storage().untyped()
try:
    import triton  # noqa: E402
    import triton.language  # noqa: E402,F401
    import triton.runtime.jit  # noqa: E402
except ImportError:
    triton = None

torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:
    pass
torch.set_grad_enabled(False)


def _gpu(hold):
    """The judges' GPU lock around this spare's untimed device work (its CPU work needs none)."""
    if not VIEW and not _in_zygote:
        (core.leap_pyr_hold_gpu if hold else core.leap_pyr_pause_gpu)()


_dev = torch.device("cuda", DEVICE) if CUDA else torch.device("cpu")


def _device_start():
    _gpu(True)
    if CUDA:
        torch.cuda.set_device(DEVICE)
        if not VIEW:
            torch.cuda.set_stream(torch.cuda.ExternalStream(core.leap_pyr_stream()))
    # What an operator's first use creates lazily (allocator pools, dispatch tables) exists before
    # the judge counts the runner's threads and mappings.
    w = torch.ones(8, 8, device=_dev)
    (torch.relu(w @ w).softmax(-1).sum() + 1).item()
    del w
    _gpu(False)


# No collection at a moment of the interpreter's choosing: after a reply it would be CPU time the
# judge counts against the next call (a runner serves one candidate; what it leaks dies with it).
gc.disable()


def view():
    """What the sandbox must hold for this interpreter with these imports: every mapped file and
    the folder of every imported package (or the module file itself)."""
    files, folders = set(), set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                files.add(parts[5].strip())
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or "." in name or name == "__main__":
            continue
        path = os.path.realpath(path)
        base = os.path.basename(path)
        if base.startswith("__init__."):
            folders.add(os.path.dirname(path))
        else:
            files.add(path)
    # Links inside those folders to files elsewhere (Debian's torch/lib): their targets too.
    for folder in list(folders):
        for root, _, names in os.walk(folder):
            for n in names:
                link = os.path.join(root, n)
                if os.path.islink(link) and not os.path.realpath(link).startswith(folder + "/"):
                    files.add(link)
    files.add(os.path.realpath(sys.executable))
    if sys.prefix != sys.base_prefix:  # a virtual environment: the interpreter finds it by this file
        files.add(os.path.join(sys.prefix, "pyvenv.cfg"))
    for f in sorted(files):
        print("file", f)
    for f in sorted(folders):
        print("folder", f)


K_PYTHON_EXCEPTION = -0x7EEF  # judge/runner/protocol.h: kPythonException


def _describe(e):
    text = f"{type(e).__name__}: {e}"
    return text.encode("utf-8", "replace")[:480]


K_NO_CUSTOM_KERNEL = -0x7EF0  # judge/runner/protocol.h: kNoCustomKernel
K_VENDOR_LIBRARY = -0x7EF1  # kVendorLibrary

# PyTorch operators whose work a vendor library does (cuBLAS/cuBLASLt, cuDNN, oneDNN/MKL/BLAS):
# matrix products, convolutions, attention, recurrent layers. A KernelBench answer writes these.
VENDOR_OPS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "addr", "matmul", "linear",
    "_addmm_activation", "_scaled_mm", "_int_mm", "convolution", "_convolution", "convolution_overrideable",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "cudnn_convolution", "cudnn_convolution_transpose", "cudnn_convolution_relu", "cudnn_convolution_add_relu",
    "mkldnn_convolution", "mkldnn_linear", "_mkldnn_convolution", "miopen_convolution", "_nnpack_spatial_convolution",
    "_slow_conv2d_forward", "slow_conv3d_forward", "slow_conv_transpose2d", "slow_conv_transpose3d",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_flash_attention_forward", "_efficient_attention_forward",
    "scaled_dot_product_attention", "_cudnn_rnn", "lstm", "gru", "rnn_tanh", "rnn_relu",
})

# Kernels of the answer's own that ran: calls into its load_inline modules and Triton launches.
_own_kernels = [0]


def _counted(f):
    @functools.wraps(f)
    def run(*args, **kwargs):
        _own_kernels[0] += 1
        return f(*args, **kwargs)
    return run


if triton is not None:
    triton.runtime.jit.JITFunction.run = _counted(triton.runtime.jit.JITFunction.run)
    if not CUDA:
        import triton.runtime.interpreter  # noqa: E402
        triton.runtime.interpreter.InterpretedFunction.run = _counted(triton.runtime.interpreter.InterpretedFunction.run)


# Triton on CUDA. Triton compiles a kernel in this process (its front end and LLVM, to PTX), then
# runs ptxas for the machine code and a C compiler for its launcher, and writes each stage to a
# cache folder. The runner runs no program and opens no file for writing (its filter), so: the
# driver compiles the PTX when the module loads (its JIT, in this process), the launch and the
# module loading are libleap-pyrunner's (the same driver calls Triton's generated C makes), and the
# cache is this process's memory (what a candidate compiled dies with its runner).
_MEM = "/leap-triton-memory/"


class _MemoryFile:
    def __init__(self, path):
        self.path = str(path)
        self.suffix = os.path.splitext(self.path)[1]

    def read_bytes(self):
        data = _MemoryCache.files[self.path]
        return data if isinstance(data, bytes) else data.encode("utf-8")

    def read_text(self):
        data = _MemoryCache.files[self.path]
        return data if isinstance(data, str) else data.decode("utf-8")


class _MemoryCache:
    files = {}
    groups = {}

    def __init__(self, key, override=False, dump=False):
        self.key = key

    def _path(self, filename):
        return f"{_MEM}{self.key}/{filename}"

    def get_file(self, filename):
        path = self._path(filename)
        return path if path in self.files else None

    def put(self, data, filename, binary=True):
        path = self._path(filename)
        self.files[path] = data if isinstance(data, bytes) else str(data)
        return path

    def get_group(self, filename):
        group = self.groups.get(self._path(filename))
        return dict(group) if group is not None else None

    def put_group(self, filename, group):
        self.groups[self._path(filename)] = dict(group)
        return self._path(filename)


def _path(p):
    return _MemoryFile(p) if str(p).startswith(_MEM) else _pathlib_path(p)


def _flat(items):
    for x in items:
        if isinstance(x, tuple):
            yield from _flat(x)
        else:
            yield x


def _bf16(v):
    return int.from_bytes(_struct.pack("<f", v), "little") >> 16


# A kernel parameter's type (Triton's signature) -> struct code and conversion; 8 bytes per slot.
_PARAM = {
    "i1": ("b", int), "i8": ("b", int), "i16": ("h", int), "i32": ("i", int), "i64": ("q", int),
    "u1": ("B", int), "u8": ("B", int), "u16": ("H", int), "u32": ("I", int), "u64": ("Q", int),
    "fp16": ("e", float), "bf16": ("H", _bf16), "fp32": ("f", float), "f32": ("f", float), "fp64": ("d", float),
}


def _pointer(arg, i):
    if arg is None:
        return 0
    if isinstance(arg, int):
        return arg
    if getattr(arg, "is_cuda", True) is False:
        raise ValueError(f"pointer argument {i} of a Triton kernel is not on the GPU")
    return int(arg.data_ptr())


class _Launcher:
    """Triton's CudaLauncher without the C module it would compile: the same arguments, packed
    into the kernel's parameter buffer, launched by libleap-pyrunner with Triton's configuration."""

    def __init__(self, src, metadata):
        signature = list(src.signature.values())
        if any(isinstance(t, str) and t.startswith("tensordesc") for t in _flat(signature)):
            raise RuntimeError("Triton tensor descriptors (TMA) as kernel arguments do not run in leap's runner yet")
        fmt, self.kinds = "<", []
        for t in _flat(signature):
            if t == "constexpr":
                self.kinds.append(None)
            elif t[0] == "*":
                fmt += "Q"
                self.kinds.append(_pointer)
            else:
                code, conv = _PARAM[t]
                fmt += code + "x" * (8 - _struct.calcsize("<" + code))
                self.kinds.append(conv)
        fmt += "QQ"  # global and profile scratch
        self.fmt = _struct.Struct(fmt)
        self.buffer = ctypes.create_string_buffer(max(8, self.fmt.size))
        n = self.fmt.size // 8
        base = ctypes.addressof(self.buffer)
        self.params = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self.num_ctas = getattr(metadata, "num_ctas", 1)
        self.global_scratch = (metadata.global_scratch_size, metadata.global_scratch_align)
        self.profile_scratch = (metadata.profile_scratch_size, metadata.profile_scratch_align)
        self.cooperative = int(bool(metadata.launch_cooperative_grid))
        self.pdl = int(bool(metadata.launch_pdl))
        self.why = ctypes.create_string_buffer(256)

    def _scratch(self, size_align, allocator, grid, stream):
        size, align = size_align
        if not size:
            return 0
        return _pointer(allocator.get()(grid * self.num_ctas * size, align, stream), -1)

    def __call__(self, grid_x, grid_y, grid_z, stream, function, kernel_metadata, launch_metadata, enter_hook,
                 exit_hook, *args):
        num_warps, num_ctas, shared = kernel_metadata
        if enter_hook is not None:
            enter_hook(launch_metadata)
        values = []
        for i, (kind, arg) in enumerate(zip(self.kinds, _flat(args))):
            if kind is _pointer:
                values.append(_pointer(arg, i))
            elif kind is not None:
                values.append(kind(arg))
        grid = grid_x * grid_y * grid_z
        values.append(self._scratch(self.global_scratch, _allocation._allocator, grid, stream))
        values.append(self._scratch(self.profile_scratch, _allocation._profile_allocator, grid, stream))
        self.fmt.pack_into(self.buffer, 0, *values)
        rc = core.leap_pyr_cu_launch(function, stream, grid_x, grid_y, grid_z, num_warps, num_ctas, shared,
                                     self.cooperative, self.pdl, self.params, self.why)
        if rc:
            raise RuntimeError("Triton kernel launch: " + self.why.value.decode("utf-8", "replace"))
        if exit_hook is not None:
            exit_hook(launch_metadata)


class _Utils:
    """Triton's cuda_utils module, through libleap-pyrunner."""

    def load_binary(self, name, kernel, shared, device):
        out, ints, why = (ctypes.c_uint64 * 2)(), (ctypes.c_int * 3)(), ctypes.create_string_buffer(256)
        if core.leap_pyr_cu_load(name.encode(), kernel, shared, device, out, ints, why):
            raise RuntimeError(f"loading Triton kernel {name}: " + why.value.decode("utf-8", "replace"))
        return out[0], out[1], ints[0], ints[1], ints[2]

    def get_device_properties(self, device):
        a = lambda attribute: core.leap_pyr_cu_attribute(attribute, device)  # noqa: E731 - CUdevice_attribute
        return {"max_shared_mem": a(97), "max_num_regs": a(12), "multiprocessor_count": a(16), "warpSize": a(10),
                "sm_clock_rate": a(13), "mem_clock_rate": a(36), "mem_bus_width": a(37)}

    def _unsupported(self, *args, **kwargs):
        raise RuntimeError("this part of Triton's CUDA driver (clusters' occupancy, printf's buffer, TMA "
                           "descriptors) does not run in leap's runner yet")

    cuOccupancyMaxActiveClusters = set_printf_fifo_size = fill_tma_descriptor = _unsupported


def _ptx_image(self, src, metadata, options, capability):
    return src.encode("utf-8") + b"\0"  # PTX: the driver compiles it at cuModuleLoadData


if CUDA and triton is not None:
    import pathlib  # noqa: E402
    import struct as _struct  # noqa: E402
    import triton.compiler.compiler as _tcompiler  # noqa: E402
    import triton.backends.nvidia.compiler as _ncompiler  # noqa: E402
    import triton.backends.nvidia.driver as _ndriver  # noqa: E402
    from triton.runtime import _allocation  # noqa: E402

    _pathlib_path = pathlib.Path
    triton.knobs.cache.manager_class = _MemoryCache
    _tcompiler.Path = _path
    _ndriver.CudaUtils = _Utils
    _ndriver.CudaLauncher = _Launcher
    _ncompiler.CUDABackend.make_cubin = _ptx_image
    # The CUDA driver, made here with the parts above (this is the CUDA runner: nothing to probe).
    _driver = _ndriver.CudaDriver()
    triton.runtime.driver._default = _driver
    triton.runtime.driver.set_active(_driver)
    # Triton asks ptxas its version (a program the runner does not run) for the PTX version it
    # writes and for its cache key: the PTX is the driver's to compile, so PyTorch's CUDA's.
    _ncompiler.get_ptxas_version = lambda arch=80: f"driver {torch.version.cuda}"
    _ncompiler.get_ptx_version_from_options = (
        lambda options, arch: options.ptx_version or _ncompiler.ptx_get_version(torch.version.cuda))
    if not VIEW:
        core.leap_pyr_cu_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int),
                                          ctypes.c_char_p]
        core.leap_pyr_cu_attribute.argtypes = [ctypes.c_int, ctypes.c_int]
        core.leap_pyr_cu_launch.argtypes = [ctypes.c_uint64, ctypes.c_uint64] + [ctypes.c_int] * 8 + [
            ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]

        # Compiled and launched once while trusted (_triton_start): what Triton's first compile
        # loads and makes (LLVM's targets, the driver's JIT) exists before the judge counts the
        # runner's state.
        @triton.jit
        def _warm(x, n, BLOCK: triton.language.constexpr):
            i = triton.language.program_id(0) * BLOCK + triton.language.arange(0, BLOCK)
            triton.language.store(x + i, triton.language.load(x + i, mask=i < n) * 2.0 + 1.0, mask=i < n)


def _triton_prepare():
    """The CUDA zygote's: Triton's first compile (its LLVM and MLIR set up, the backend's passes
    loaded: most of a first compile's time) for its runners' GPU, without the device (a fork after
    CUDA's initialisation would leave the runners no usable CUDA), so that each runner's warm-up
    compile is a later one. Leaves the process single-threaded."""
    if not (CUDA and triton is not None and CAPABILITY > 0):
        return
    try:
        from triton.backends.compiler import GPUTarget
        src = triton.compiler.ASTSource(fn=_warm, signature={"x": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                                        constexprs={"BLOCK": 128})
        triton.compile(src, target=GPUTarget("cuda", CAPABILITY, 32))
    except Exception as e:  # noqa: BLE001 - each runner then compiles its first kernel itself, as without it
        print(f"leap-pyrunner: Triton's first compile in the zygote failed ({type(e).__name__}: {e})", file=sys.stderr)
    _MemoryCache.files.clear()
    _MemoryCache.groups.clear()


def _triton_start():
    """Triton's warm-up: its compile (CPU alone, no GPU lock), then its launch under the hold,
    which stays for the rest of the warm-up."""
    compiled = CUDA and triton is not None and not VIEW
    if compiled:
        _warm.warmup(torch.float32, 1000, BLOCK=128, grid=(8,))
    _gpu(True)
    if compiled:
        w = torch.ones(1000, device=_dev)
        _warm[(8,)](w, 1000, BLOCK=128)
        if float(w.sum().item()) != 3000.0:
            raise RuntimeError("Triton's warm-up kernel computed a wrong result")
        del w
        _MemoryCache.files.clear()
        _MemoryCache.groups.clear()


class RuleBroken(Exception):
    def __init__(self, rc, text):
        super().__init__(text)
        self.rc = rc


class Audit(TorchDispatchMode):
    """The PyTorch operators a correctness call runs (the extensions' own ATen calls included)."""

    def __init__(self):
        super().__init__()
        self.ops, self.vendor = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if name not in self.ops:
            self.ops.append(name)
            if name in VENDOR_OPS:
                self.vendor.append(name)
        return func(*args, **(kwargs or {}))


def _same(a, b):
    return (a.data_ptr() == b.data_ptr() and a.dtype == b.dtype and a.device == b.device
            and tuple(a.shape) == tuple(b.shape) and tuple(a.stride()) == tuple(b.stride()))


def _overlaps(a, b):
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    a1 = a0 + sum((n - 1) * abs(st) for n, st in zip(a.shape, a.stride())) * a.element_size() + a.element_size()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a1


def _contiguous(shape, stride):
    expected, ok = 1, True
    for n, st in reversed(list(zip(shape, stride))):
        ok = ok and (n == 1 or st == expected)
        expected *= n
    return ok


def _factory(name, args, kwargs):
    """(shape, dtype, device, zeroed) of a fresh contiguous tensor a factory call makes, or None."""
    if kwargs.get("layout", torch.strided) not in (None, torch.strided):
        return None
    fmt = kwargs.get("memory_format")
    if name in ("empty_like", "zeros_like"):
        like = args[0]
        if fmt not in (None, torch.contiguous_format) and not (fmt is torch.preserve_format and like.is_contiguous()):
            return None
        shape, dtype, device = tuple(like.shape), kwargs.get("dtype") or like.dtype, kwargs.get("device") or like.device
    elif name in ("new_empty", "new_zeros"):
        shape, dtype, device = tuple(args[1]), kwargs.get("dtype") or args[0].dtype, kwargs.get("device") or args[0].device
    elif name in ("empty", "zeros"):
        if fmt not in (None, torch.contiguous_format, torch.preserve_format):
            return None
        shape, dtype, device = tuple(args[0]), kwargs.get("dtype") or torch.get_default_dtype(), kwargs.get("device")
    elif name == "empty_strided":
        if not _contiguous(args[0], args[1]):
            return None
        shape, dtype, device = tuple(args[0]), kwargs.get("dtype") or torch.get_default_dtype(), kwargs.get("device")
    else:
        return None
    return shape, dtype, torch.device(device if device is not None else "cpu"), "zeros" in name


if TorchDispatchMode is not object:
    class OutputsInPlace(TorchDispatchMode):
        """The call's outputs without a copy: a tensor the call creates with an output's shape, type
        and device (torch.empty_like and the like, from Python or from an extension's C++) is that
        output's buffer, each buffer handed out once, in order; a forward that returns it has
        written its result where the judge reads it. Anything else is copied as before."""

        def __init__(self, outputs):
            super().__init__()
            self.free = list(outputs)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if self.free:
                spec = _factory(func._schema.name.split("::")[-1], args, kwargs)
                if spec is not None:
                    shape, dtype, device, zeroed = spec
                    for k, out in enumerate(self.free):
                        same_device = out.device.type == device.type and device.index in (None, out.device.index)
                        if tuple(out.shape) == shape and out.dtype == dtype and same_device:
                            del self.free[k]
                            return out.zero_() if zeroed else out
            return func(*args, **kwargs)
else:
    OutputsInPlace = None

def warm_up():
    """The device's and Triton's first use, and what the dispatch modes import lazily on first use
    (PyTorch's dispatch-mode machinery): done before the sandbox's view is listed, before the
    judge counts the runner's state, before the process is confined. The GPU lock's hold it ends
    with is released by the ready reply."""
    _device_start()
    _triton_start()
    _dispatch_start(_dev)
    gc.collect()
    gc.freeze()


def _dispatch_start(device):
    o = torch.ones(4, device=device)
    with Audit():
        torch.relu(o).sum().item()
        if OutputsInPlace is not None:
            with OutputsInPlace([o]):
                torch.empty_like(o).fill_(1.0)
    del o


class Extensions:
    """load_inline's stand-in: the modules the compile farm built from this answer's own load_inline
    calls (same name, same sources), loaded from the descriptors the judge passed."""

    def __init__(self, names, fds):
        self.libraries = dict(zip(names, fds))
        self.modules = {}

    def load_inline(self, name, *args, **kwargs):
        if name in self.modules:
            return self.modules[name]
        if name not in self.libraries:
            raise RuntimeError(f"load_inline(name={name!r}) was not built: leap builds the load_inline calls it finds "
                               "in the answer's source, with literal arguments")
        path = f"/proc/self/fd/{self.libraries[name]}"
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        for attr in dir(module):
            f = getattr(module, attr)
            if not attr.startswith("_") and callable(f):
                setattr(module, attr, _counted(f))
        self.modules[name] = module
        return module


# torch.nn.init's in-place initialisers (kaiming_uniform_, normal_, zeros_, ...): what modules'
# reset_parameters() fill their parameters with.
_INITIALISERS = [n for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")]


def _build(model_new, init_inputs, loaded):
    """ModelNew(*init_inputs) after torch.manual_seed(42), as KernelBench builds it. Where every
    parameter an initialiser fills is one of the problem's (`loaded`: load_parameters overwrites them
    before the first call), it is built with the initialisers as no-ops (a Linear(32768, 32768)'s
    initial values are 1.07e9 random numbers drawn on the host). It is built again with
    them where anything could have seen those values: the constructor drew random numbers of its
    own (the generators moved), an initialiser filled another tensor, or a module keeps a tensor in
    a plain attribute (a copy made from an initial value, say)."""
    if loaded:
        model = _without_initialisers(model_new, init_inputs, loaded)
        if model is not None:
            return model
    torch.manual_seed(42)
    return model_new(*init_inputs)


def _rng_states():
    return [torch.get_rng_state()] + (torch.cuda.get_rng_state_all() if CUDA else [])


def _without_initialisers(model_new, init_inputs, loaded):
    filled, saved = [], {n: getattr(torch.nn.init, n) for n in _INITIALISERS}

    def skip(tensor, *args, **kwargs):
        filled.append(tensor)
        return tensor

    torch.manual_seed(42)
    before = _rng_states()
    # With nothing to draw, on the device itself (PyTorch 2's default-device context): no host copy
    # of the parameters to allocate and move (4.3 GB for a Linear(32768, 32768)).
    where = torch.device(_dev) if CUDA and hasattr(torch, "set_default_device") else contextlib.nullcontext()
    try:
        for n in saved:
            setattr(torch.nn.init, n, skip)
        with where:
            model = model_new(*init_inputs)
    except Exception:  # noqa: BLE001 - built again with its initialisers, where a failure is the verdict
        return None
    finally:
        for n, f in saved.items():
            setattr(torch.nn.init, n, f)
    if not isinstance(model, torch.nn.Module) or any(not torch.equal(a, b) for a, b in zip(_rng_states(), before)):
        return None
    names = {id(p): n for n, p in model.named_parameters()}
    if any(names.get(id(t)) not in loaded for t in filled):
        return None
    for m in model.modules():
        for key, value in vars(m).items():
            if key in ("_parameters", "_buffers", "_modules"):
                continue
            inside = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
            if any(isinstance(v, torch.Tensor) for v in inside):
                return None
    return model


class Candidate:
    def __init__(self, manifest, n_in, n_out, extensions):
        torch.utils.cpp_extension.load_inline = extensions.load_inline
        self.n_in, self.n_out = n_in, n_out
        self.forward_inputs = int(manifest["forward_inputs"])
        self.parameters = list(manifest.get("parameters", []))
        namespace = {"__name__": "candidate", "__builtins__": __builtins__, "__file__": "candidate.py"}
        # inspect.getsource finds the answer's text (Triton's @jit reads its kernels' source).
        source = manifest["source"]
        linecache.cache["candidate.py"] = (len(source), None, source.splitlines(True), "candidate.py")
        code = compile(source, "candidate.py", "exec")
        exec(code, namespace)
        model_new = namespace.get("ModelNew")
        if model_new is None:
            raise NameError("the candidate defines no ModelNew")
        self.model = _build(model_new, manifest.get("init_inputs", []), set(self.parameters)).to(_dev).eval()
        self.params_loaded = not self.parameters
        self.rule = bool(manifest.get("require_custom_kernel", True)) and TorchDispatchMode is not object

    def load_parameters(self, values):
        # The problem's parameters, by their state_dict names: the reference's own values.
        state = self.model.state_dict()
        for name, value in zip(self.parameters, values):
            if name not in state:
                raise KeyError(f"ModelNew has no parameter or buffer {name!r} (the problem's Model has)")
            if tuple(state[name].shape) != tuple(value.shape):
                raise ValueError(f"ModelNew's {name!r} has shape {tuple(state[name].shape)}, "
                                 f"the problem's {tuple(value.shape)}")
            state[name].copy_(value)
        self.params_loaded = True

    def forward(self, inputs, audit):
        if not (audit and self.rule):
            return self.model(*inputs)
        before = _own_kernels[0]
        with Audit() as seen:
            result = self.model(*inputs)
        if seen.vendor:
            raise RuleBroken(K_VENDOR_LIBRARY, ", ".join("aten::" + op for op in seen.vendor) +
                             " (KernelBench answers write these as kernels of their own; [eval] require_custom_kernel = false allows them)")
        if _own_kernels[0] == before:
            raise RuleBroken(K_NO_CUSTOM_KERNEL, "only PyTorch operators ran (" +
                             ", ".join("aten::" + op for op in seen.ops[:8]) + ")")
        return result

    def call(self, slot, audit):
        views = [torch.utils.dlpack.from_dlpack(_capsule(core.leap_pyr_view(slot, i), b"dltensor", None))
                 for i in range(self.n_in + self.n_out)]
        inputs, outputs = views[:self.n_in], views[self.n_in:]
        if not self.params_loaded:
            self.load_parameters(inputs[self.forward_inputs:])
        if OutputsInPlace is None:
            result = self.forward(inputs[:self.forward_inputs], audit)
        else:
            with OutputsInPlace(outputs):
                result = self.forward(inputs[:self.forward_inputs], audit)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != self.n_out:
            raise ValueError(f"ModelNew.forward returned {len(results)} tensors; the problem has {self.n_out}")
        for i, (out, got) in enumerate(zip(outputs, results)):
            if not isinstance(got, torch.Tensor):
                raise TypeError(f"output {i} is a {type(got).__name__}, not a tensor")
            if tuple(got.shape) != tuple(out.shape):
                raise ValueError(f"output {i} has shape {tuple(got.shape)}; the problem's is {tuple(out.shape)}")
        # A result that is its output's buffer is in place; one inside another output's buffer is
        # copied out before any copy writes there.
        in_place = [_same(got, out) for out, got in zip(outputs, results)]
        for i, got in enumerate(results):
            if not in_place[i] and any(_overlaps(got, out) for out in outputs):
                results[i] = got.clone()
        for out, got, done in zip(outputs, results, in_place):
            if not done:
                out.copy_(got)


def serve():
    core.leap_pyr_ready()
    seq, slot = ctypes.c_uint64(), ctypes.c_uint32()
    fds, nfds = (ctypes.c_int * 8)(), ctypes.c_int()
    cand = None
    while True:
        op = core.leap_pyr_receive(ctypes.byref(seq), ctypes.byref(slot), fds, 8, ctypes.byref(nfds))
        if op == 0:
            return
        if op == 1:
            core.leap_pyr_calibrate()
        elif op == 2:
            got = [fds[i] for i in range(nfds.value)]
            with os.fdopen(got[0], "rb") as f:
                manifest = json.loads(f.read().decode("utf-8"))
            arena = got[1] if not CUDA and len(got) > 1 else -1
            extensions = Extensions(manifest.get("extensions", []), got[2 if not CUDA else 1:])
            map_us = core.leap_pyr_map_and_confine(arena)
            n_in, n_out = ctypes.c_int(), ctypes.c_int()
            core.leap_pyr_layout(ctypes.byref(n_in), ctypes.byref(n_out))
            t = time.monotonic()
            try:
                cand = Candidate(manifest, n_in.value, n_out.value, extensions)
            except BaseException as e:  # noqa: BLE001 - the candidate's code: every failure is its verdict
                core.leap_pyr_loaded(0, b"cannot load the candidate: " + _describe(e), map_us, 0.0)
                return
            core.leap_pyr_loaded(1, None, map_us, (time.monotonic() - t) * 1e6)
        elif op == 3:
            core.leap_pyr_begin()
            rc, message = 0, None
            try:
                cand.call(slot.value, core.leap_pyr_audit())
            except RuleBroken as e:
                rc, message = e.rc, str(e).encode("utf-8", "replace")[:480]
            except BaseException as e:  # noqa: BLE001
                rc, message = K_PYTHON_EXCEPTION, _describe(e)
            core.leap_pyr_end(rc, message)


def zygote():
    """Forks a runner per request of the judge's; the runner serves one candidate, then exits here."""
    global _in_zygote
    token, fds, nfds = ctypes.c_uint64(), (ctypes.c_int * 4)(), ctypes.c_int()
    core.leap_pyr_zygote_ready()
    while core.leap_pyr_zygote_next(ctypes.byref(token), fds, ctypes.byref(nfds)):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _in_zygote = False
            core.leap_pyr_child(fds, nfds.value)
            if CUDA:
                warm_up()
            serve()
            sys.stderr.flush()
            os._exit(0)
        core.leap_pyr_zygote_forked(token.value, pid, fds, nfds.value)


if VIEW:
    warm_up()
    view()
elif ZYGOTE:
    if CUDA:
        _triton_prepare()
        _dispatch_start(torch.device("cpu"))  # what the dispatch modes import, imported once here
        gc.collect()
        gc.freeze()
    else:
        warm_up()  # no device to make afresh: the runners fork warm
    zygote()
else:
    warm_up()
    serve()
