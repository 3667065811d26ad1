"""ug-llvm: the `cpu` device of ug, kernels compiled by LLVM through llvmlite."""

__version__ = "0.1.0"
