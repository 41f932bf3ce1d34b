/* webhook/metrics.c: the text of the server's worker counters. */
#include "base/strbuf.h"
#include "webhook/metrics.h"

#include <criterion/criterion.h>
#include <stdint.h>

Test(metrics, worker_requests_one_line_per_worker)
{
	const uint64_t requests[] = {4, 0, 18446744073709551615u};
	struct strbuf sb;

	strbuf_init(&sb, 1 << 16);
	metrics_render_workers(&sb, requests, 3);
	cr_assert_not(strbuf_failed(&sb));
	cr_assert_str_eq(
	    sb.buf,
	    "# HELP gpugate_http_worker_requests_total HTTP requests begun on "
	    "each server worker thread (workers numbered in the order they "
	    "first served).\n"
	    "# TYPE gpugate_http_worker_requests_total counter\n"
	    "gpugate_http_worker_requests_total{worker=\"0\"} 4\n"
	    "gpugate_http_worker_requests_total{worker=\"1\"} 0\n"
	    "gpugate_http_worker_requests_total{worker=\"2\"} "
	    "18446744073709551615\n");
	strbuf_release(&sb);
}
