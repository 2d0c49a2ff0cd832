# Sourced by scripts/serve-vs-nginx and scripts/serve-variants: the nginx they measure
# against (configured as issue 4 asks) and one wrk run with the server's CPU.

# nginx_start WORK ROOT: one worker pinned to CPU 1, sendfile and tcp_nopush on,
# open_file_cache, no access log, on 127.0.0.1:18081; sets ngw to the worker's pid.
nginx_start() {
  cat > "$1/nginx.conf" <<CONF
worker_processes 1;
worker_cpu_affinity 10;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  open_file_cache max=1000 inactive=60s;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:18081; root $2; }
}
CONF
  nginx -c "$1/nginx.conf" &
  sleep 1
  ngw=$(pgrep -f "nginx: worker process" | head -1)
}

# measure_wrk PORT PATH PID OUT: wrk -t1 -c32 for $secs seconds on CPU 0; appends the
# requests/s to OUT.rps and the server's CPU µs per request (utime + stime of PID) to
# OUT.cpu_us_per_req; fails on any non-2xx answer.
measure_wrk() {
  local c0 c1 res n
  c0=$(awk '{print $14+$15}' "/proc/$3/stat")
  res=$(taskset -c 0 wrk -t1 -c32 -d"${secs}s" "http://127.0.0.1:$1/$2")
  c1=$(awk '{print $14+$15}' "/proc/$3/stat")
  if grep -q "Non-2xx" <<< "$res"; then echo "${0##*/}: $(basename "$4") answered errors" >&2; exit 1; fi
  n=$(awk '/requests in/{print $1}' <<< "$res")
  awk '/Requests\/sec/{print $2}' <<< "$res" >> "$4.rps"
  awk -v c=$((c1 - c0)) -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.4f\n", c * 1e6 / hz / n }' >> "$4.cpu_us_per_req"
}
