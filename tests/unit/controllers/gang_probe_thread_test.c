/*
 * controllers/gang-probe.c's thread against tests/integration/fakekube.py,
 * an API that serves no gang start: scheduling.k8s.io/v1beta1 answers 404
 * (not served) and a Job create 405 (an answer that says nothing of the
 * field).  The bits it publishes, the log-once of a failed probe, the
 * gauge, and a probe again after a policy reload.
 */
#include "base/diag.h"
#include "controllers/gang-probe.h"
#include "metrics/metrics.h"
#include "policy/gang.h"
#include "tests/unit/kube/fakekube_proc.h"
#include "tests/unit/kube/log_capture.h"
#include "tests/unit/test_policy.h"
#include "webhook/holder.h"

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char policy_yaml[] = "version: 1\nflavors: []\nclasses: []\ntenants: []\n";

static struct fakekube F;

static void start(void)
{
	struct diag d;

	diag_init(&d);
	cr_assert_eq(fakekube_start(&F, &d), 0, "the fake API did not start: %s",
		     diag_text(&d));
	log_capture_start();
}

static void stop(void)
{
	log_capture_stop();
	fakekube_stop(&F);
}

TestSuite(gang_probe_thread, .init = start, .fini = stop, .timeout = 60);

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool wait_bits(_Atomic unsigned *v, unsigned want)
{
	for (long long until = mono_ms() + 10000; mono_ms() < until; usleep(5000))
		if (atomic_load(v) == want)
			return true;
	return atomic_load(v) == want;
}

static size_t logged(const char *needle)
{
	char *text = log_captured();
	size_t n = log_count(text, needle);

	free(text);
	return n;
}

Test(gang_probe_thread, nothing_served_then_a_reload_probes_again)
{
	const unsigned K = GANG_SERVES_KNOWN, C = GANG_SERVES_CONTROLLER;
	struct holder *h = holder_new(test_policy(policy_yaml));
	struct metrics *m = metrics_new();
	_Atomic unsigned served = 0;
	struct gang_probe *p = NULL;
	struct diag d;
	char *text = NULL;
	size_t len;

	diag_init(&d);
	cr_assert_eq(gang_probe_start(&(struct gang_probe_config){.kube = &F.cfg,
								  .policy = h,
								  .metrics = m,
								  .namespace = "gpugate",
								  .served = &served},
				      &p, &d),
		     0, "%s", diag_text(&d));
	/* Discovery said no; the Job dry run said nothing (405): known, no
	 * route but the controller's gates. */
	cr_assert(wait_bits(&served, K | C), "bits %#x", atomic_load(&served));
	cr_assert_eq(metrics_render(m, NULL, &text, &len), 0);
	cr_expect(strstr(text, "gpugate_gang_route{route=\"gates\"} 1\n"), "%s", text);
	free(text);
	/* Someone else's word, then a reload: probed again at once, and the
	 * podgroups (and topology) the API does not serve are taken back. */
	atomic_store(&served, K | C | GANG_SERVES_PODGROUP | GANG_SERVES_TOPOLOGY);
	holder_swap(h, test_policy(policy_yaml));
	cr_assert(wait_bits(&served, K | C), "bits %#x", atomic_load(&served));
	gang_probe_stop(p);
	cr_expect_eq(logged("msg=\"gang start served\" workload=no podgroup=no "
			    "topology=no controller=yes known=yes auto=gates"),
		     1, "one line per change of the bits");
	cr_expect_eq(logged("msg=\"gang start probe failed\""), 1,
		     "the same failure is logged once");
	cr_expect_eq(logged("405"), 1, "it says why");
	metrics_free(m);
	holder_free(h);
}
