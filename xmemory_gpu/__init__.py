"""xmemory_gpu: xMemory hierarchical agent memory with batched GPU/CPU kernels."""

__version__ = "0.1.0"
