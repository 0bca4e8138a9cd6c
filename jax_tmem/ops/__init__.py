"""jax_tmem's ops, one module each (internal): the JAX primitive, its abstract evaluation, its lowerings
(FFI custom call or XLA), its batching rule, the path decision and its custom VJP.

- ``gemm``: ``act(alpha * dot_general(lhs, rhs) + bias) + c``.
- ``transpose``: the transpose of 1-byte (fp8) operands that the tensor cores read K-major only.

The public functions (``jax_tmem.matmul``, ``jax_tmem.dot_general``) live in ``jax_tmem.api``.
"""
