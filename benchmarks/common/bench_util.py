# SPDX-License-Identifier: MIT
"""Helpers shared by the LAMMPS benchmark drivers (benchmarks/mace-lammps/run_benchmark.py and
benchmarks/chgnet-lammps/run_benchmark.py).

Both drivers run every configuration (LAMMPS, or a peer code's worker: the driver itself
re-invoked with a JSON spec) in its own process under a psutil watchdog that stops it above a
memory or time limit, record the load average and the time before and after each run, and
write the machine, the versions of what ran and the results to a JSON file. Those pieces live
here, once; what each driver measures stays in the driver. The drivers import this module by
path (benchmarks/common on sys.path), so each still runs as `python benchmarks/<x>/run_benchmark.py`.
Only the standard library at import time (psutil when a watchdog starts).
"""
import datetime
import hashlib
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import threading
import time

# ---------------------------------------------------------------------------------------------
# Load, time, memory


def load():
    """The 1, 5 and 15 minute load averages, rounded."""
    return [round(x, 2) for x in os.getloadavg()]


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def meminfo_kb():
    """/proc/meminfo in kB: {"MemTotal": ..., "MemAvailable": ..., ...}."""
    out = {}
    for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
        f = line.split()
        if len(f) >= 2 and f[0].endswith(":"):
            out[f[0][:-1]] = int(f[1])
    return out


def mem_available_mb():
    kb = meminfo_kb().get("MemAvailable")
    return float("nan") if kb is None else kb / 1024.0


def mem_total_gb():
    kb = meminfo_kb().get("MemTotal")
    return float("nan") if kb is None else kb / 1024 ** 2


# ---------------------------------------------------------------------------------------------
# Processes under a watchdog


def run_watched(cmd, env, timeout, limit_mb, *, cwd, fresh_rusage=False,
                memory_msg="stopped: resident memory reached {rss_gb:.1f} GB, over --memory-limit-gb",
                timeout_msg="stopped: timed out after {timeout:.0f} s"):
    """Runs cmd in cwd; kills it (and its children) when the resident memory of the process tree
    exceeds limit_mb or the wall time exceeds timeout. Returns (returncode, stdout, stderr,
    why-killed or None, peak tree RSS in MB as polled every 0.2 s). why-killed is memory_msg or
    timeout_msg, formatted with rss_gb, limit_gb and timeout.

    fresh_rusage: Linux keeps a process's peak resident set (ru_maxrss) across execve, so a
    program started straight from a large Python process would report that process's peak
    (torch, pymatgen: ~300 MB) as a floor. With fresh_rusage a small shell forks the program
    (the "; exit" stops it from exec'ing in place), which gives it a fresh count."""
    import psutil  # pylint: disable=import-outside-toplevel
    if fresh_rusage:
        cmd = ["/bin/sh", "-c", '"$@"; exit $?', "sh"] + list(cmd)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state = {"peak": 0.0, "why": None}

    def tree():
        try:
            root = psutil.Process(proc.pid)
            return [root] + root.children(recursive=True)
        except psutil.Error:
            return []

    def watch():
        t0 = time.monotonic()
        while proc.poll() is None:
            rss = 0
            for p in tree():
                try:
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
            rss /= 2 ** 20
            state["peak"] = max(state["peak"], rss)
            why = None
            if rss > limit_mb:
                why = memory_msg.format(rss_gb=rss / 1024, limit_gb=limit_mb / 1024, timeout=timeout)
            elif time.monotonic() - t0 > timeout:
                why = timeout_msg.format(rss_gb=rss / 1024, limit_gb=limit_mb / 1024, timeout=timeout)
            if why:
                state["why"] = why
                for p in reversed(tree()):
                    try:
                        p.kill()
                    except psutil.Error:
                        pass
                return
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    stdout, stderr = proc.communicate()
    watcher.join()
    return proc.returncode, stdout, stderr, state["why"], round(state["peak"], 1)


def worker_command(script, flag, spec):
    """The command that re-runs script as a worker (script flag '<spec as JSON>'), and how it
    reads in the shell, for the record."""
    cmd = [sys.executable, str(pathlib.Path(script).resolve()), flag, json.dumps(spec)]
    return cmd, " ".join(cmd[:-1]) + f" '{json.dumps(spec)}'"


def run_worker(cmd, rec, env, timeout, limit_mb, **watchdog):
    """Runs a worker process (see worker_command) under run_watched (watchdog: its keyword
    arguments) and completes rec: load and time before and after, wall time, the watchdog's
    peak, and either the worker's result (the JSON after "RESULT " on its stdout) with status
    "ok", or why it failed or was stopped."""
    rec.update(load_before=load(), started=now())
    t0 = time.perf_counter()
    code, stdout, stderr, killed, peak = run_watched(cmd, env, timeout, limit_mb, **watchdog)
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    rec["load_after"] = load()
    rec["watchdog_peak_rss_mb"] = peak
    result = [line[7:] for line in stdout.splitlines() if line.startswith("RESULT ")]
    if killed:
        rec["status"] = killed
    elif code != 0 or not result:
        rec["status"] = f"failed (exit {code})"
        rec["stderr_tail"] = stderr[-3000:]
    else:
        rec.update(json.loads(result[0]))
        rec["status"] = "ok"
    return rec


# ---------------------------------------------------------------------------------------------
# LAMMPS logs


def lammps_log_header(text):
    """From a LAMMPS log (in.bench.lmp prints `info memory` before and after the run): the
    LAMMPS version and the peak resident set before and after, in MB (None where absent)."""
    out = {}
    m = re.search(r"^LAMMPS \((.+)\)", text, re.M)
    out["lammps_version"] = m.group(1) if m else None
    rss = [float(x) for x in re.findall(r"Maximum resident set size: ([0-9.eE+]+) Mbyte", text)]
    out["rss_before_mb"], out["rss_after_mb"] = (rss + [None, None])[:2]
    return out


# ---------------------------------------------------------------------------------------------
# Machine and software


def cpu_info():
    """{"cpu_model", "cpu_mhz", "cores", "simd"} from /proc/cpuinfo (its first CPU)."""
    cpu = {}
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if ":" in line:
            k, v = (s.strip() for s in line.split(":", 1))
            if k in ("model name", "cpu MHz", "flags") and k not in cpu:
                cpu[k] = v
    flags = set(cpu.get("flags", "").split())
    return {"cpu_model": cpu.get("model name"), "cpu_mhz": cpu.get("cpu MHz"), "cores": os.cpu_count(),
            "simd": [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f") if f in flags]}


def os_info():
    """{"kernel", "os"}: the kernel release and the Debian version (else platform's name)."""
    debian = pathlib.Path("/etc/debian_version")
    return {"kernel": platform.release(),
            "os": debian.read_text().strip() if debian.exists() else platform.platform()}


def git(repo, *args):
    """`git args` in repo, its stdout stripped ("" where git fails)."""
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False).stdout.strip()


def cmake_cache(plugin):
    """Build type, compiler, flags and FASTMLIP_* options from the CMakeCache.txt of the build
    that made plugin (build/lib/fastmlipplugin.so -> build/CMakeCache.txt); {} without one."""
    cache = {}
    cache_file = pathlib.Path(plugin).resolve().parents[1] / "CMakeCache.txt"
    if cache_file.exists():
        for line in cache_file.read_text().splitlines():
            m = re.match(r"(CMAKE_BUILD_TYPE|CMAKE_CXX_FLAGS|CMAKE_CXX_FLAGS_RELEASE|CMAKE_CXX_COMPILER|"
                         r"FASTMLIP_\w+):\w+=(.*)", line)
            if m:
                cache[m.group(1)] = m.group(2)
    return cache


def file_info(path, mtime=True):
    """{"path", "sha256"} of a file, and with mtime its modification time (UTC)."""
    path = pathlib.Path(path)
    out = {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    if mtime:
        out["mtime"] = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc) \
            .strftime("%Y-%m-%d %H:%M:%S UTC")
    return out


def mpirun_version():
    """The first line of `mpirun --version`, None without mpirun."""
    try:
        return subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                              check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------
# Results


def write_json(path, res):
    """Writes res to path through a temporary file, so that a reader never sees half a file."""
    path = pathlib.Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(res, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, path)
