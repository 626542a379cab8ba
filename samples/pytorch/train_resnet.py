#!/usr/bin/env python3
"""Train torchvision's resnet50 (weights=None) on random data, with vramkit or PyTorch's allocator.

Modes:
  --allocator vramkit --lib build/lib/pytorch/libvramkit_torch.so   one run on the vramkit pool
  --allocator pytorch                                               one run on PyTorch's caching allocator
  --compare --lib build/lib/pytorch/libvramkit_torch.so             both, each in its own process (the
      allocator can only be chosen before CUDA is first used), then compares the losses and prints
      one JSON object: losses, the largest loss difference, and peak reserved bytes of each.

A single run prints one loss per step and, last, one line "RESULT {json}". Both runs use the same
seed and deterministic settings, so their losses should agree to the tolerance (--tolerance).
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

# cuBLAS needs this before CUDA starts for torch.use_deterministic_algorithms(True).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allocator", choices=["vramkit", "pytorch"], default="vramkit")
    parser.add_argument("--compare", action="store_true", help="run both allocators and compare")
    parser.add_argument("--lib", default="build/lib/pytorch/libvramkit_torch.so", help="path of libvramkit_torch.so")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--image", type=int, default=224, help="image side in pixels")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest allowed relative loss difference")
    return parser.parse_args()


def train(arguments):
    """One run in this process; returns the result dictionary."""
    stats = None
    if arguments.allocator == "vramkit":
        import torch  # noqa: E402  (imported here so that nothing touches CUDA before the switch)

        library_path = os.path.abspath(arguments.lib)
        allocator = torch.cuda.memory.CUDAPluggableAllocator(library_path, "vramkit_alloc", "vramkit_free")
        torch.cuda.memory.change_current_allocator(allocator)
        library = ctypes.CDLL(library_path)
        library.vramkit_stats_json.restype = ctypes.c_char_p
        library.vramkit_stats_json.argtypes = [ctypes.c_int]

        def stats():
            return json.loads(library.vramkit_stats_json(arguments.device).decode())
    import torch
    import torchvision

    torch.manual_seed(arguments.seed)
    torch.cuda.manual_seed_all(arguments.seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # warn_only: adaptive_avg_pool2d_backward has no deterministic CUDA kernel; it warns instead of
    # raising, and the comparison tolerance covers its atomics.
    torch.use_deterministic_algorithms(True, warn_only=True)

    device = torch.device("cuda", arguments.device)
    torch.cuda.set_device(device)
    model = torchvision.models.resnet50(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_function = torch.nn.CrossEntropyLoss()
    # The data is drawn on the CPU from its own generator, so both runs see the same batches.
    generator = torch.Generator().manual_seed(arguments.seed)
    losses = []
    model.train()
    step_seconds = []
    for step in range(arguments.steps):
        images = torch.randn(arguments.batch, 3, arguments.image, arguments.image, generator=generator)
        labels = torch.randint(0, 1000, (arguments.batch,), generator=generator)
        # Time the device step (copy in, forward, backward, update), not the CPU's random numbers;
        # loss.item() waits for the step, so the clock stops when its work is done.
        torch.cuda.synchronize(device)
        started = time.perf_counter()
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_function(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        step_seconds.append(time.perf_counter() - started)
        print(f"step {step:4d} loss {losses[-1]:.6f} time {step_seconds[-1] * 1e3:.1f} ms", flush=True)
    torch.cuda.synchronize(device)
    warm = step_seconds[3:] if len(step_seconds) > 3 else step_seconds  # skip cuDNN/allocator warm-up

    result = {"allocator": arguments.allocator, "steps": arguments.steps, "batch": arguments.batch,
              "seed": arguments.seed, "losses": losses,
              "median_step_seconds": statistics.median(warm) if warm else None}
    if stats is not None:
        pool = stats()
        result["peak_reserved_bytes"] = pool.get("peak_reserved_bytes")
        result["peak_used_bytes"] = pool.get("peak_used_bytes")
        result["vramkit"] = pool
    else:
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
        result["peak_used_bytes"] = torch.cuda.max_memory_allocated(device)
    return result


def run_child(arguments, allocator):
    command = [sys.executable, os.path.abspath(__file__), "--allocator", allocator, "--lib", arguments.lib,
               "--steps", str(arguments.steps), "--batch", str(arguments.batch), "--image", str(arguments.image),
               "--seed", str(arguments.seed), "--device", str(arguments.device)]
    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    sys.stderr.write(completed.stdout)
    if completed.returncode != 0:
        raise SystemExit(f"the {allocator} run failed with exit status {completed.returncode}")
    results = [line[len("RESULT "):] for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    if not results:
        raise SystemExit(f"the {allocator} run printed no RESULT line")
    return json.loads(results[-1])


def compare(arguments):
    vramkit = run_child(arguments, "vramkit")
    pytorch = run_child(arguments, "pytorch")
    differences = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(vramkit["losses"], pytorch["losses"])]
    largest = max(differences) if differences else 0.0
    matched = len(vramkit["losses"]) == len(pytorch["losses"]) and largest <= arguments.tolerance
    report = {
        "steps": arguments.steps, "batch": arguments.batch, "seed": arguments.seed,
        "losses_match": matched, "largest_relative_loss_difference": largest, "tolerance": arguments.tolerance,
        "vramkit": {"peak_reserved_bytes": vramkit["peak_reserved_bytes"],
                    "median_step_seconds": vramkit["median_step_seconds"],
                    "peak_used_bytes": vramkit["peak_used_bytes"], "losses": vramkit["losses"],
                    "pool": vramkit.get("vramkit")},
        "pytorch": {"peak_reserved_bytes": pytorch["peak_reserved_bytes"],
                    "median_step_seconds": pytorch["median_step_seconds"],
                    "peak_used_bytes": pytorch["peak_used_bytes"], "losses": pytorch["losses"]},
    }
    print(json.dumps(report, indent=2))
    return 0 if matched else 1


def main():
    arguments = parse_arguments()
    if arguments.compare:
        return compare(arguments)
    result = train(arguments)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
