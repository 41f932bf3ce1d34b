# bench/lib.sh - shell pieces the bench/ scripts share (sourced).

# Stops a process started here: SIGTERM, up to 10 s for a graceful stop,
# then SIGKILL; reaps it.  A process already gone is only reaped.
stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

# wait_for_line FILE PATTERN PID ERRFILE WHAT: waits up to 10 s for a line
# of FILE that matches grep's PATTERN, written by process PID; when PID
# exits first or the time runs out, shows ERRFILE and dies (the caller's
# die) with "WHAT did not start".
wait_for_line() {
  local file=$1 pattern=$2 pid=$3 errfile=$4 what=$5 i
  for i in $(seq 400); do
    grep -q -- "$pattern" "$file" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.025
  done
  cat "$errfile" >&2
  die "$what did not start"
}
