# Does NVML (the driver's list of processes with a context) see this machine's processes by the
# pids this process sees? Prints the list while a CUDA child lives and after it exits.
import ctypes, subprocess, time, sys
nvml = ctypes.CDLL("libnvidia-ml.so.1")
print("init", nvml.nvmlInit_v2())
h = ctypes.c_void_p()
print("handle", nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)))
class P(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]
def procs():
    n = ctypes.c_uint(64); arr = (P * 64)()
    r = nvml.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), arr)
    return r, [(arr[i].pid, arr[i].usedGpuMemory >> 20) for i in range(n.value)]
print("before", procs())
child = subprocess.Popen([sys.executable, "-c", "import torch,time,os; x=torch.ones(1<<28,device='cuda'); print(os.getpid(),flush=True); time.sleep(30)"], stdout=subprocess.PIPE)
pid = int(child.stdout.readline())
time.sleep(1)
print("child pid", pid, "nvml", procs())
child.kill(); child.wait()
for i in range(5):
    print("after exit +%d ms" % (i * 20), procs()); time.sleep(0.02)
