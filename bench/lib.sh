# bench/lib.sh - shell pieces bench/run.sh and bench/ab.sh share (sourced).

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
