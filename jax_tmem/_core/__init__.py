"""Shared infrastructure of jax_tmem's ops (internal): path decisions and logging (``config``), loading
the C++ extension and registering its FFI targets (``ext``), dimension numbers -> strided GEMM
(``canon``), and what each GPU architecture's kernels take (``arch``).

Dependency order, never reversed: ``_core`` <- ``ops`` (one module per op) <- ``api`` (the public
functions) <- layers, recipes and sharding rules.
"""
