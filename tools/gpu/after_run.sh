# Sourced by the GPU scripts that run after tools/gpu/run.sh in the same device call
# (step_graphs.sh, ranks.sh), from the source tree's root with START and BUDGET_S set: the
# library paths of run.sh's build, and the stage helpers.
[ -d deps ] && export LD_LIBRARY_PATH="$PWD/deps/lib:${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
left() { echo $(( START + BUDGET_S - $(date +%s) )); }
# A command under the time left minus a reserve for the stages after it.
run_for() { local reserve=$1; shift; local t=$(( $(left) - reserve )); (( t < 5 )) && t=5; timeout "$t" "$@"; }
section() { echo; echo "## $1 ($(( $(date +%s) - START )) s in)"; echo; }
