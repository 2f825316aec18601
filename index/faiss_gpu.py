"""FAISS at run time: the GPUs it reports, moving an index there and back (every index type xmine
builds, with a warning where FAISS cannot), and the reason in its errors. GPU symbols are looked
up at run time only, so faiss-cpu works unchanged."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def faiss_reason(e: RuntimeError) -> str:
    """The reason in a FAISS RuntimeError ("Error in ... failed: <why>"), on one line."""
    detail = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    return detail.rpartition("failed: ")[2] or detail


def gpu_count() -> int:
    import faiss

    get = getattr(faiss, "get_num_gpus", None)
    try:
        return int(get()) if get is not None else 0
    except Exception:  # noqa: BLE001 - a broken CUDA setup must not break CPU use
        return 0


def units_use_gpus(executor) -> bool:
    """Whether FAISS work units run on GPUs: the cluster's when `executor` knows them (the
    driver's own GPUs do not count there), else this machine's."""
    gpus = executor.gpus()
    return (gpu_count() if gpus is None else gpus) > 0


def to_gpu(index):
    """(gpu_index, resources), or (index, None) with a WARNING when FAISS cannot put this index
    type on the GPU (HNSW has no GPU version): never silently."""
    import faiss

    try:
        res = faiss.StandardGpuResources()
        # IVF-PQ with many sub-quantisers (PQ64 at 384 dimensions) does not fit the GPU's shared
        # memory with float32 lookup tables; FAISS's GPU IVFPQ supports it with float16 tables.
        options = faiss.GpuClonerOptions()
        options.useFloat16LookupTables = True
        return faiss.index_cpu_to_gpu(res, 0, index, options), res
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        log.warning("%s stays on the CPU: FAISS cannot move it to the GPU even with float16 lookup "
                    "tables (%s); use --index-type ivf/ivfpq/opq/flat for GPU search, or --cpu",
                    type(index).__name__, reason)
        return index, None


def to_cpu(index, res):
    import faiss

    return faiss.index_gpu_to_cpu(index) if res is not None else index
