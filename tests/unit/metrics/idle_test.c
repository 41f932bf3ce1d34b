/* The idle GPUs' series (metrics/idle.c), as a scrape writes them. */
#include "metrics/metrics.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static char *render(struct metrics *m)
{
	char *out = NULL;
	size_t len = 0;

	cr_assert_eq(metrics_render(m, NULL, &out, &len), 0);
	return out;
}

static const char *const reasons[] = {"unreachable", "timeout", "garbage"};

Test(metrics_idle, nothing_before_an_idle_controller_runs)
{
	struct metrics *m = metrics_new();
	char *t;

	metrics_prometheus(m, false, "timeout");
	t = render(m);
	cr_assert_null(strstr(t, "gpugate_prometheus"));
	cr_assert_null(strstr(t, "gpugate_idle_gpus"));
	free(t);
	metrics_free(m);
}

Test(metrics_idle, up_errors_by_reason_idle_and_busy)
{
	struct metrics *m = metrics_new();
	struct metrics_idle_row idle[] = {{"research", "h100", 8}, {"vision", "l4", 1},
					  {"research", "h100", 2}};
	struct metrics_idle_row busy[] = {{"research", "h100", 90.5}, {"vision", "l4", 0}};
	char *t;

	metrics_idle_on(m, true, reasons, 3);
	t = render(m);
	cr_assert_null(strstr(t, "gpugate_prometheus_up"), "no round yet (a follower): no answer");
	cr_assert(strstr(t, "gpugate_prometheus_errors_total{reason=\"garbage\"} 0\n"));
	free(t);
	metrics_prometheus(m, true, NULL);
	metrics_prometheus(m, false, "timeout");
	metrics_prometheus(m, false, "timeout");
	metrics_idle_gpus(m, idle, 3);
	metrics_gpu_busy(m, busy, 2);
	metrics_gpu_busy(m, busy, 1);
	t = render(m);
	cr_assert(strstr(t, "# TYPE gpugate_prometheus_up gauge\ngpugate_prometheus_up 0\n"), "%s", t);
	cr_assert(strstr(t, "gpugate_prometheus_errors_total{reason=\"unreachable\"} 0\n"));
	cr_assert(strstr(t, "gpugate_prometheus_errors_total{reason=\"timeout\"} 2\n"));
	cr_assert(strstr(t, "gpugate_idle_gpus{tenant=\"research\",flavor=\"h100\"} 10\n"), "%s", t);
	cr_assert(strstr(t, "gpugate_idle_gpus{tenant=\"vision\",flavor=\"l4\"} 1\n"));
	cr_assert(strstr(t, "gpugate_gpu_busy_seconds_total{tenant=\"research\",flavor=\"h100\"} "
			    "181.000\n"), "%s", t);
	cr_assert(strstr(t, "gpugate_gpu_busy_seconds_total{tenant=\"vision\",flavor=\"l4\"} "
			    "0.000\n"));
	free(t);
	/* The gauge is replaced whole: nothing idle, no series. */
	metrics_idle_gpus(m, NULL, 0);
	metrics_prometheus(m, true, NULL);
	t = render(m);
	cr_assert_null(strstr(t, "gpugate_idle_gpus{"));
	cr_assert(strstr(t, "gpugate_prometheus_up 1\n"));
	free(t);
	metrics_free(m);
}

Test(metrics_idle, no_prometheus_url_no_up_gauge)
{
	struct metrics *m = metrics_new();
	char *t;

	metrics_idle_on(m, false, reasons, 3);
	t = render(m);
	cr_assert_null(strstr(t, "gpugate_prometheus_up"));
	cr_assert(strstr(t, "# TYPE gpugate_idle_gpus gauge\n"));
	free(t);
	metrics_free(m);
}
