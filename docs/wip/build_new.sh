# Sourced by the docs/wip device scripts: $O (logs), t0 / el (elapsed), and this tree's package in build/jt_new
# (built once per machine; a warm machine reuses it).
O=${OUT:-/tmp/o}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
if [ ! -f build/jt_new/jax_tmem/__init__.py ]; then
  python3 -m pip install --no-build-isolation --no-deps --target build/jt_new -C build-dir=build/b_new --upgrade . \
    > "$O/build.log" 2>&1 || { echo BUILD FAILED; tail -30 "$O/build.log"; exit 1; }
  echo "built $(el)"
fi
