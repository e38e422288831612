# SPDX-License-Identifier: MIT
"""Data-pipeline benchmark of train-potential (issue 22): preprocessing, dataset size, start-up.

    .venv/bin/python benchmarks/trainer/run_dataset_bench.py --graphs 26508            # Table 3 at 1%
    .venv/bin/python benchmarks/trainer/run_dataset_bench.py --graphs 265082 --json r.json
    .venv/bin/python benchmarks/trainer/run_dataset_bench.py --draw mptrj --graphs 158031   # MPtrj's rows at 10%

One command, one run, each step alone on the machine, in this order:

1. the data: `fastmlip-pack --synthetic table3:N --write-sizes` (the MACE paper's Table 3 size
   distribution at N graphs; with --draw mptrj its MPtrj rows only), then
   make_synthetic_dataset.py writes it as labelled extxyz;
2. `train-potential preprocess` on 1 rank and on 2 ranks (mpirun): wall time, the peak resident
   set size of the largest rank (GNU time around each rank), the dataset's bytes on disk against
   the extxyz file's;
3. mace-torch's `mace_prepare_data` (HDF5; the venv of tests/reference/setup-venv.sh, when it
   is there) on the same file with its statistics, 1 process: wall time, peak RSS, bytes;
4. start-up of a training run from the extxyz file and from the preprocessed dataset: the time
   from launch to the log's "data:" line (the data read, split and counted), to its "model:"
   line (the model built) and to the end of the first optimiser step (the checkpoint that
   --checkpoint_interval 1 writes after it appears: the epoch's plan made and the first bin read,
   batched and trained), and the peak RSS (VmHWM) at that point, after which the run is stopped.
   Twice each: with the normalisation fixed on the command line (E0s, avg_num_neighbors, mean,
   std), the data's start-up alone, and with it computed from the training set (--E0s average,
   avg_num_neighbors at r_max, rms_forces_scaling), as a fresh model's run does.

Results: JSON (--json) and a summary on stdout; benchmarks/README.md records them.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
E0S = "{1: -1.1, 6: -8.0, 7: -8.3, 8: -4.9, 3: -1.9, 12: -1.5, 14: -5.4, 26: -8.3, 29: -3.7, 28: -5.5}"
# A small model and fixed normalisation: the start-up measured is the data's.
TRAIN = ["--name", "synth", "--valid_fraction", "0.05", "--r_max", "5.0", "--num_channels", "8",
         "--max_L", "0", "--max_ell", "1", "--correlation", "2", "--num_interactions", "1",
         "--max_num_epochs", "1", "--checkpoint_interval", "1"]
FIXED = ["--E0s", E0S, "--compute_avg_num_neighbors", "false", "--avg_num_neighbors", "30", "--mean", "0",
         "--std", "1"]
COMPUTED = ["--E0s", "average", "--compute_avg_num_neighbors", "true", "--scaling", "rms_forces_scaling"]


def du(path):
    p = pathlib.Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def timed(cmd, cwd, env=None):
    """Runs cmd; returns (wall seconds, stdout+stderr)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-4000:]}")
    return wall, r.stdout


def rss_files(work, tag):
    return sorted(pathlib.Path(work).glob(f"rss-{tag}.*"))


def max_rss_mb(files):
    best = 0
    for f in files:
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read_text())
        if m:
            best = max(best, int(m.group(1)))
    return round(best / 1024, 1)


def preprocess(exe, data, out, ranks, work):
    tag = f"pre{ranks}"
    # GNU time around each rank, its report named after the rank.
    inner = (f'exec /usr/bin/time -v -o {work}/rss-{tag}.${{OMPI_COMM_WORLD_RANK:-0}} "$@"')
    cmd = ["sh", "-c", inner, "sh", exe, "preprocess", "--train_file", data, "--output", out, "--r_max", "5.0"]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    # Open MPI refuses root without these (containers, CI machines); other MPIs ignore them.
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    wall, log = timed(cmd, work, env=env)
    return {"ranks": ranks, "wall_s": round(wall, 2), "peak_rss_mb_largest_rank": max_rss_mb(rss_files(work, tag)),
            "bytes": du(pathlib.Path(out) / "train"), "log": log.strip().splitlines()[-1]}


def mace_prepare(venv, data, work):
    exe = pathlib.Path(venv) / "bin" / "mace_prepare_data"
    if not exe.exists():
        return {"status": f"not run: no {exe}"}
    out = pathlib.Path(work) / "mace_h5"
    cmd = ["/usr/bin/time", "-v", "-o", f"{work}/rss-mace.0", str(exe), "--train_file", data,
           "--valid_fraction", "0.05", "--h5_prefix", str(out) + "/", "--r_max", "5.0", "--compute_statistics",
           "--E0s", E0S, "--num_process", "1", "--seed", "1", "--energy_key", "REF_energy",
           "--forces_key", "REF_forces", "--stress_key", "REF_stress"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        return {"status": f"failed ({r.returncode})", "tail": r.stdout[-2000:]}
    return {"status": "ok", "wall_s": round(wall, 2), "peak_rss_mb": max_rss_mb(rss_files(work, "mace")),
            "bytes": du(out)}


def startup(exe, train_file, work, tag, normalisation, capacity):
    """Launch to the "data:" and "model:" lines and the first step's checkpoint; the peak RSS
    then; the run is then stopped."""
    run_dir = pathlib.Path(work) / tag
    cmd = [exe, "--train_file", train_file, "--work_dir", str(run_dir), "--batch_capacity", str(capacity)] + TRAIN + \
        normalisation
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    out = {"source": train_file, "normalisation": "fixed" if normalisation is FIXED else "computed"}
    lines = []
    for line in p.stdout:
        lines.append(line.rstrip())
        t = round(time.perf_counter() - t0, 2)
        if line.startswith("data:") and "to_data_line_s" not in out:
            out["to_data_line_s"] = t
            out["data_line"] = line.strip()
        if line.startswith("model:"):
            out["to_model_line_s"] = t
            out["model_line"] = line.strip()[:160]
            break
    ckpt = run_dir / "checkpoints" / "synth.ckpt"
    while "to_model_line_s" in out and p.poll() is None and not ckpt.exists():
        time.sleep(0.02)
    if ckpt.exists():
        t1 = time.perf_counter()
        out["to_first_step_s"] = round(t1 - t0, 2)
        status = pathlib.Path(f"/proc/{p.pid}/status").read_text()
        out["peak_rss_mb"] = round(int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024, 1)
        # The next checkpoint (the file is replaced after every step): one step's time.
        first = ckpt.stat().st_mtime_ns
        while p.poll() is None and ckpt.stat().st_mtime_ns == first:
            time.sleep(0.01)
        out["second_step_s"] = round(time.perf_counter() - t1, 2)
    p.kill()
    rest = p.stdout.read()
    p.wait()
    if "to_first_step_s" not in out:
        sys.exit(f"start-up from {train_file} failed:\n" + "\n".join(lines[-30:]) + rest[-3000:])
    shutil.rmtree(run_dir, ignore_errors=True)
    return out


def sampler_cost(pack, spec, capacity):
    """The trainer's planner (--sampler fastmlip, one rank) on the same sizes: its time for one
    epoch's plan and the number of steps, from fastmlip-pack's report."""
    r = subprocess.run([pack, "--synthetic", spec, "--capacity", str(capacity), "--algorithm", "fastmlip",
                        "--epochs", "2"], check=True, stdout=subprocess.PIPE, text=True)
    row = next(l.split() for l in r.stdout.splitlines() if l.startswith("fastmlip "))
    return {"steps": int(row[2]), "plan_s_per_epoch": float(row[6])}  # pack_s: the epochs' mean


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=26508, help="N of table3:N (265082 is 10%%)")
    ap.add_argument("--draw", choices=["table3", "mptrj"], default="table3",
                    help="fastmlip-pack's synthetic size distribution: all of Table 3, or its MPtrj rows")
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--venv", default=str(REPO / ".venv"), help="mace-torch's venv (tests/reference/setup-venv.sh)")
    ap.add_argument("--skip-mace", action="store_true")
    ap.add_argument("--capacity", type=int, default=3072,
                    help="--batch_capacity of the training runs (a small one keeps the first step's own memory "
                         "small, so that the peak RSS shows the data's part)")
    ap.add_argument("--json")
    args = ap.parse_args()
    exe = str(pathlib.Path(args.build) / "bin" / "train-potential")
    pack = str(pathlib.Path(args.build) / "bin" / "fastmlip-pack")
    work = tempfile.mkdtemp(prefix="fastmlip-dataset-bench-")
    res = {"command": " ".join([sys.executable] + sys.argv),
           "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
           "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
           "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                                    text=True).stdout.strip(),
           "graphs": args.graphs, "draw": args.draw, "capacity": args.capacity}
    try:
        sizes = f"{work}/sizes.txt"
        data = f"{work}/synth.xyz"
        subprocess.run([pack, "--synthetic", f"{args.draw}:{args.graphs}", "--write-sizes", sizes, "--capacity", "100000"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, str(REPO / "benchmarks/trainer/make_synthetic_dataset.py"), "--sizes", sizes,
                        "--output", data], check=True)
        res["extxyz_bytes"] = du(data)
        res["atoms"] = sum(int(l.split()[0]) for l in open(sizes) if l.strip() and not l.startswith("#"))
        res["preprocess"] = [preprocess(exe, data, f"{work}/pre{r}", r, work) for r in (1, 2)]
        res["mace_prepare_data"] = {"status": "skipped"} if args.skip_mace else mace_prepare(args.venv, data, work)
        res["sampler"] = sampler_cost(pack, f"{args.draw}:{args.graphs}", args.capacity)
        res["startup"] = [startup(exe, source, work, tag + "_" + str(k), norm, args.capacity)
                          for k, norm in enumerate((FIXED, COMPUTED))
                          for source, tag in ((data, "from_xyz"), (f"{work}/pre1/train", "from_pre"))]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["finished"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
