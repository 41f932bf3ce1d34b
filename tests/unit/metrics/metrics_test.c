/* Every line of Prometheus text gpugate writes (metrics/metrics.c). */
#include "base/diag.h"
#include "base/procstat.h"
#include "base/version.h"
#include "base/strbuf.h"
#include "policy/policy.h"
#include "metrics/metrics.h"
#include "policy/pool.h"
#include "usage/inventory.h"
#include "usage/usage.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char policy_yaml[] =
	"version: 1\n"
	"flavors:\n"
	"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, gpusPerNode: 8}\n"
	"classes: []\n"
	"tenants:\n"
	"  - {name: a, namespaces: [a], quota: [{flavor: h100, nominal: 10}]}\n";

static char *render(struct metrics *m, const struct metrics_state *st)
{
	char *out = NULL;
	size_t len = 0;

	cr_assert_eq(metrics_render(m, st, &out, &len), 0);
	cr_assert_eq(strlen(out), len);
	return out;
}

/* The families in the order a scrape shows them. */
static void assert_families(const char *text, const char *const *want, size_t n)
{
	const char *at = text;

	for (size_t i = 0; i < n; i++) {
		char line[160];

		snprintf(line, sizeof(line), "# TYPE %s ", want[i]);
		at = strstr(at, line);
		cr_assert_not_null(at, "family %s missing or out of order", want[i]);
	}
}

Test(metrics, counters_quota_feed_certificate_and_workers)
{
	static const char *const families[] = {
		"gpugate_build_info",
		"gpugate_admission_requests_total", "gpugate_admission_duration_seconds",
		"gpugate_policy_reloads_total", "gpugate_certificate_reloads_total",
		"gpugate_quota_nominal", "gpugate_quota_used", "gpugate_ledger_entries",
		"gpugate_kube_watch_connected", "gpugate_kube_synced",
		"gpugate_certificate_expiry_timestamp_seconds",
		"gpugate_certificate_expiry_seconds", "gpugate_ready",
		"gpugate_http_worker_requests_total",
	};
	struct metrics *m = metrics_new();
	const uint64_t workers[] = {5, 0};
	struct policy *p = NULL;
	struct diag d;
	char *text;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", policy_yaml, strlen(policy_yaml), &p, &d), 0,
		     "%s", diag_text(&d));
	metrics_admission(m, METRICS_MUTATE, METRICS_POD, METRICS_ALLOWED, 0.0003);
	metrics_policy_reload(m, false);
	text = render(m, &(struct metrics_state){
				 .policy = p, .api = true, .api_connected = true,
				 .cert_not_after = 1893456000, .ready = true,
				 .worker_requests = workers, .workers = 2});
	assert_families(text, families, sizeof(families) / sizeof(families[0]));
	cr_assert(strstr(text, "gpugate_admission_requests_total{endpoint=\"mutate\","
			       "kind=\"Pod\",result=\"allowed\"} 1\n"));
	cr_assert(strstr(text, "gpugate_admission_duration_seconds_bucket{endpoint="
			       "\"mutate\",le=\"0.0005\"} 1\n"));
	cr_assert(strstr(text, "gpugate_admission_duration_seconds_bucket{endpoint="
			       "\"mutate\",le=\"0.00025\"} 0\n"));
	cr_assert(strstr(text, "gpugate_policy_reloads_total{result=\"failure\"} 1\n"));
	cr_assert(strstr(text, "# HELP gpugate_quota_nominal Nominal quota, in units "
			       "of the flavor's resource.\n"
			       "# TYPE gpugate_quota_nominal gauge\n"
			       "gpugate_quota_nominal{tenant=\"a\",flavor=\"h100\"} 10\n"));
	cr_assert(strstr(text, "gpugate_quota_used{tenant=\"a\",flavor=\"h100\"} 0\n"),
		  "no usage store: nothing in use");
	cr_assert(strstr(text, "gpugate_ledger_entries 0\n"));
	cr_assert(strstr(text, "gpugate_kube_watch_connected 1\n# HELP gpugate_kube_synced"));
	cr_assert(strstr(text, "gpugate_kube_synced 0\n"));
	cr_assert(strstr(text, "\ngpugate_certificate_expiry_timestamp_seconds 1893456000\n"));
	cr_assert(strstr(text, "# HELP gpugate_certificate_expiry_seconds Deprecated: "
			       "gpugate_certificate_expiry_timestamp_seconds.\n"
			       "# TYPE gpugate_certificate_expiry_seconds gauge\n"
			       "gpugate_certificate_expiry_seconds 1893456000\n"),
		  "the old name, for one release");
	cr_assert(strstr(text, "\ngpugate_ready 1\n"));
	cr_assert_null(strstr(text, "process_"), "no process state: no process lines");
	cr_assert(strstr(text, "gpugate_http_worker_requests_total{worker=\"0\"} 5\n"
			       "gpugate_http_worker_requests_total{worker=\"1\"} 0\n"));
	free(text);
	policy_free(p);
	metrics_free(m);
}

Test(metrics, only_what_is_known)
{
	struct metrics *m = metrics_new();
	char *text = render(m, NULL);

	cr_assert(strstr(text, "# TYPE gpugate_admission_requests_total counter\n"));
	cr_assert_null(strstr(text, "gpugate_quota_nominal"), "no state, no quota");
	free(text);
	text = render(m, &(struct metrics_state){0});
	cr_assert(strstr(text, "# TYPE gpugate_quota_nominal gauge\n# HELP"),
		  "no policy: the family, no line");
	cr_assert_null(strstr(text, "gpugate_kube_synced"), "embedded: no feed lines");
	cr_assert_null(strstr(text, "gpugate_http_worker_requests_total"),
		       "no workers: no worker lines");
	free(text);
	metrics_free(m);
}

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

Test(metrics, build_info_always)
{
	struct metrics *m = metrics_new();
	char *text = render(m, NULL);
	char want[256];

	snprintf(want, sizeof(want),
		 "# TYPE gpugate_build_info gauge\n"
		 "gpugate_build_info{version=\"%s\",revision=\"%s\"} 1\n",
		 version_string(), version_revision());
	cr_assert(strstr(text, want), "%s", text);
	cr_assert_str_neq(version_string(), "");
	free(text);
	metrics_free(m);
}

Test(metrics, process_families_as_client_libraries_name_them)
{
	struct metrics *m = metrics_new();
	struct procstat ps = {.cpu_seconds = 3.75, .start_time_seconds = 1764901234.5,
			      .resident_bytes = 10485760, .virtual_bytes = 1073741824,
			      .open_fds = 12, .max_fds = 1024};
	char *text = render(m, &(struct metrics_state){.process = &ps});

	cr_assert(strstr(text, "# TYPE process_cpu_seconds_total counter\n"
			       "process_cpu_seconds_total 3.75\n"));
	cr_assert(strstr(text, "# TYPE process_resident_memory_bytes gauge\n"
			       "process_resident_memory_bytes 10485760\n"));
	cr_assert(strstr(text, "# TYPE process_virtual_memory_bytes gauge\n"
			       "process_virtual_memory_bytes 1073741824\n"));
	cr_assert(strstr(text, "# TYPE process_open_fds gauge\nprocess_open_fds 12\n"));
	cr_assert(strstr(text, "# TYPE process_max_fds gauge\nprocess_max_fds 1024\n"));
	cr_assert(strstr(text, "# TYPE process_start_time_seconds gauge\n"
			       "process_start_time_seconds 1764901234.50\n"));
	free(text);
	ps.max_fds = PROCSTAT_UNLIMITED;
	text = render(m, &(struct metrics_state){.process = &ps});
	cr_assert(strstr(text, "\nprocess_max_fds +Inf\n"));
	free(text);
	metrics_free(m);
}

/* Gang start pushes its series (metrics_gang*): written once a gang-start
 * controller runs; the waiting rows replaced whole per route. */
Test(metrics, gangs_pushed_by_gang_start)
{
	struct metrics *m = metrics_new();
	char *text = render(m, &(struct metrics_state){.api = true});
	const struct metrics_gang_waiting rows[] = {
		{"research", "h100-80gb", 1}, {"research", "h100-80gb", 1},
		{"vi\"sion", "l4", 3}};

	cr_assert_null(strstr(text, "gpugate_gang"), "no controller: no lines");
	free(text);
	metrics_gang_regated(NULL, "x"); /* no sink: a no-op */
	metrics_gangs_on(m);
	metrics_gangs_waiting(m, "gates", rows, 3);
	metrics_gangs_waiting(m, "nonsense", rows, 3);
	metrics_gang_started(m, "gates", 4.5);
	metrics_gang_started(m, "gates", 7000);
	metrics_gang_regated(m, "research");
	metrics_gang_regated(m, "research");
	text = render(m, &(struct metrics_state){.api = true});
	cr_assert(strstr(text, "# TYPE gpugate_gangs_waiting gauge\n"
			       "gpugate_gangs_waiting{route=\"gates\",tenant=\"research\","
			       "flavor=\"h100-80gb\"} 2\n"
			       "gpugate_gangs_waiting{route=\"gates\",tenant=\"vi_sion\","
			       "flavor=\"l4\"} 3\n# HELP"),
		  "%s", text);
	cr_assert(strstr(text, "gpugate_gang_start_seconds_bucket{route=\"gates\",le=\"2\"} 0\n"
			       "gpugate_gang_start_seconds_bucket{route=\"gates\",le=\"5\"} 1\n"),
		  "%s", text);
	cr_assert(strstr(text, "gpugate_gang_start_seconds_bucket{route=\"gates\",le=\"+Inf\"} 2\n"
			       "gpugate_gang_start_seconds_sum{route=\"gates\"} 7004.500\n"
			       "gpugate_gang_start_seconds_count{route=\"gates\"} 2\n"),
		  "%s", text);
	cr_assert(strstr(text, "gpugate_gang_start_seconds_count{route=\"workload\"} 0\n"));
	cr_assert(strstr(text, "# TYPE gpugate_gang_regates_total counter\n"
			       "gpugate_gang_regates_total{tenant=\"research\"} 2\n"),
		  "%s", text);
	free(text);
	metrics_gangs_waiting(m, "gates", NULL, 0);
	text = render(m, &(struct metrics_state){.api = true});
	cr_assert_null(strstr(text, "gpugate_gangs_waiting{"), "replaced whole");
	free(text);
	metrics_free(m);
}

/* The reclaimer pushes its steps (metrics_reclaim*); the two families are
 * written once it runs, between the meter and the feed, as before. */
Test(metrics, reclaims_pushed_by_the_reclaimer)
{
	struct metrics *m = metrics_new();
	char *text = render(m, &(struct metrics_state){.api = true});

	cr_assert_null(strstr(text, "gpugate_reclaims_total"), "no reclaimer: no lines");
	cr_assert_null(strstr(text, "gpugate_checkpoint_wait_seconds"));
	free(text);
	metrics_reclaim(NULL, METRICS_RECLAIM_FAILED); /* no sink: a no-op */
	metrics_reclaims_on(m);
	metrics_reclaim(m, METRICS_RECLAIM_SIGNALLED);
	metrics_reclaim(m, METRICS_RECLAIM_SIGNALLED);
	metrics_reclaim(m, METRICS_RECLAIM_ABANDONED);
	metrics_reclaim(m, METRICS_RECLAIM_DELETED);
	metrics_reclaim(m, METRICS_RECLAIM_RESUMED);
	metrics_reclaim(m, METRICS_RECLAIM_FAILED);
	metrics_reclaim(m, METRICS_RECLAIM_FAILED);
	metrics_reclaim(m, METRICS_RECLAIM_FAILED);
	metrics_reclaim_released(m, true, 12.25);
	metrics_reclaim_released(m, false, 300.5);
	metrics_reclaim_released(m, true, 0.0);
	text = render(m, &(struct metrics_state){.api = true});
	cr_assert(strstr(text,
			 "# HELP gpugate_reclaims_total Steps of reclaims of lent GPUs, by "
			 "result: signalled (checkpoint requested), checkpointed or timeout "
			 "(released after the workload's report, or without it), abandoned "
			 "(no longer needed), deleted (a pod past its grace, a "
			 "PodDisruptionBudget or a long grace), resumed, failed (a write the "
			 "API refused).\n"
			 "# TYPE gpugate_reclaims_total counter\n"
			 "gpugate_reclaims_total{result=\"signalled\"} 2\n"
			 "gpugate_reclaims_total{result=\"checkpointed\"} 2\n"
			 "gpugate_reclaims_total{result=\"timeout\"} 1\n"
			 "gpugate_reclaims_total{result=\"abandoned\"} 1\n"
			 "gpugate_reclaims_total{result=\"deleted\"} 1\n"
			 "gpugate_reclaims_total{result=\"resumed\"} 1\n"
			 "gpugate_reclaims_total{result=\"failed\"} 3\n"
			 "# HELP gpugate_checkpoint_wait_seconds From the checkpoint request "
			 "to the release of a reclaimed workload.\n"
			 "# TYPE gpugate_checkpoint_wait_seconds summary\n"
			 "gpugate_checkpoint_wait_seconds_sum 312.750\n"
			 "gpugate_checkpoint_wait_seconds_count 3\n"
			 "# HELP gpugate_kube_watch_connected "),
		  "%s", text);
	free(text);
	metrics_free(m);
}

/* The gang-start probe pushes the route auto picks; written once pushed,
 * one line per route, 1 for the one picked. */
Test(metrics, the_gang_route_pushed_by_the_probe)
{
	struct metrics *m = metrics_new();
	char *text = render(m, NULL);

	cr_assert_null(strstr(text, "gpugate_gang_route"), "no probe: no lines");
	free(text);
	metrics_gang_route(NULL, GANG_GATES); /* no sink: a no-op */
	metrics_gang_route(m, GANG_GATES);
	text = render(m, NULL);
	cr_assert(strstr(text, "# TYPE gpugate_gang_route gauge\n"
			       "gpugate_gang_route{route=\"workload\"} 0\n"
			       "gpugate_gang_route{route=\"podgroup\"} 0\n"
			       "gpugate_gang_route{route=\"gates\"} 1\n"),
		  "%s", text);
	free(text);
	metrics_gang_route(m, GANG_WORKLOAD);
	text = render(m, NULL);
	cr_assert(strstr(text, "gpugate_gang_route{route=\"workload\"} 1\n"
			       "gpugate_gang_route{route=\"podgroup\"} 0\n"
			       "gpugate_gang_route{route=\"gates\"} 0\n"));
	free(text);
	metrics_gang_route(m, GANG_NONE);
	text = render(m, NULL);
	cr_assert(strstr(text, "gpugate_gang_route{route=\"workload\"} 0\n"
			       "gpugate_gang_route{route=\"podgroup\"} 0\n"
			       "gpugate_gang_route{route=\"gates\"} 0\n"));
	free(text);
	metrics_free(m);
}

/* Effective capacity (policy/capacity.h) from the inventory's summaries:
 * two h100 nodes of 8, one cordoned; tenant a (nominal 10) holds 2, b
 * (nominal 12) nothing; 6 free.  l4 has no node: unknown, unbacked 0, no
 * tenant series. */
Test(metrics, effective_capacity_from_the_inventory)
{
	static const char yaml[] =
		"version: 1\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive, "
		"gpusPerNode: 8}\n"
		"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: time-slicing, "
		"gpusPerNode: 8}\n"
		"classes: []\n"
		"tenants:\n"
		"  - {name: a, namespaces: [a], quota: [{flavor: h100, nominal: 10}, "
		"{flavor: l4, nominal: 4}]}\n"
		"  - {name: b, namespaces: [b], quota: [{flavor: h100, nominal: 12}]}\n"
		"  - {name: c, namespaces: [c], quota: [{flavor: l4, nominal: 4}]}\n";
	struct metrics *m = metrics_new();
	struct inventory *inv = inventory_new();
	struct usage_store *u = usage_memory_new(&(struct usage_memory_config){0});
	struct pool_resource r = {"nvidia.com/gpu", 8, 8, 0};
	struct pool_condition ready = {"Ready", "True", ""};
	struct pool_node n = {.name = "n1", .resources = &r, .n_resources = 1,
			      .conditions = &ready, .n_conditions = 1, .ready = true};
	struct inventory_ask ask = {"nvidia.com/gpu", 2};
	struct inventory_placement pl = {"p1", "n1", &ask, 1, NULL, NULL};
	struct policy *p = NULL;
	struct diag d;
	char *text;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), 0, "%s",
		     diag_text(&d));
	cr_assert(inv && u);
	usage_observe(u, &(struct usage_item){.uid = "p1", .kind = USAGE_PODS,
					      .namespace = "a", .name = "p1",
					      .tenant = "a", .flavor = "h100",
					      .per_pod = 2, .slots = 1, .units = 2,
					      .active = true});
	inventory_relist_begin(inv, INVENTORY_NODES);
	cr_assert_eq(inventory_node_put(inv, &n), 0);
	n.name = "n2";
	n.unschedulable = true;
	cr_assert_eq(inventory_node_put(inv, &n), 0);
	inventory_relist_end(inv, INVENTORY_NODES);
	inventory_relist_begin(inv, INVENTORY_PODS);
	cr_assert_eq(inventory_pod_put(inv, &pl), 0);
	inventory_relist_end(inv, INVENTORY_PODS);
	text = render(m, &(struct metrics_state){.policy = p, .usage = u,
						 .inventory = inv, .api = true});
	cr_expect(strstr(text, "# TYPE gpugate_capacity_usable gauge\n"
			       "gpugate_capacity_usable{flavor=\"h100\"} 8\n"
			       "gpugate_capacity_usable{flavor=\"l4\"} 0\n"),
		  "%s", text);
	cr_expect(strstr(text, "gpugate_capacity_promised{flavor=\"h100\"} 22\n"
			       "gpugate_capacity_promised{flavor=\"l4\"} 8\n"));
	cr_expect(strstr(text, "gpugate_capacity_unbacked{flavor=\"h100\"} 14\n"
			       "gpugate_capacity_unbacked{flavor=\"l4\"} 0\n"));
	/* a: 10 - 2 - 6 free = 2; b: 12 - 6 = 6; l4 has no node: 0; b has
	 * no l4 quota: no series */
	cr_expect(strstr(text, "# TYPE gpugate_tenant_unbacked gauge\n"
			       "gpugate_tenant_unbacked{tenant=\"a\",flavor=\"h100\"} 2\n"
			       "gpugate_tenant_unbacked{tenant=\"b\",flavor=\"h100\"} 6\n"
			       "gpugate_tenant_unbacked{tenant=\"a\",flavor=\"l4\"} 0\n"
			       "gpugate_tenant_unbacked{tenant=\"c\",flavor=\"l4\"} 0\n"
			       "# HELP"),
		  "%s", text);
	cr_expect_null(strstr(text, "gpugate_tenant_unbacked{tenant=\"b\",flavor=\"l4\""));
	free(text);
	usage_free(u);
	inventory_free(inv);
	policy_free(p);
	metrics_free(m);
}

/* The health loop: the steps counter once a controller runs; the gauges
 * from the inventory's nodes carrying gpugate's record, on any replica. */
Test(metrics, health_gauges_from_the_nodes_and_steps_from_the_controller)
{
	struct diag d;
	struct policy *p = NULL;
	struct inventory *inv = inventory_new();
	struct metrics *m = metrics_new();
	struct pool_resource r = {"nvidia.com/gpu", 8, 8, 0};
	struct pool_taint t = {"gpugate.io/unhealthy", "validating", "NoSchedule"};
	struct pool_node out = {.name = "h0", .resources = &r, .n_resources = 1,
				.taints = &t, .n_taints = 1, .ready = true,
				.health_record = "o=1000000 c=2000000 n=1 t=x"};
	struct pool_node ok = {.name = "h1", .resources = &r, .n_resources = 1,
			       .ready = true};
	char *text, *at;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", policy_yaml, strlen(policy_yaml), &p, &d), 0);
	text = render(m, &(struct metrics_state){.api = true, .policy = p, .inventory = inv});
	cr_assert_null(strstr(text, "gpugate_health_steps_total"), "no controller: no lines");
	cr_assert_null(strstr(text, "gpugate_nodes_out_seconds"), "not synced: nothing known");
	free(text);

	inventory_relist_begin(inv, INVENTORY_NODES);
	cr_assert_eq(inventory_node_put(inv, &ok), 0);
	inventory_relist_end(inv, INVENTORY_NODES);
	inventory_relist_begin(inv, INVENTORY_PODS);
	inventory_relist_end(inv, INVENTORY_PODS);
	text = render(m, &(struct metrics_state){.api = true, .policy = p, .inventory = inv});
	cr_assert(strstr(text, "# TYPE gpugate_nodes_out_seconds gauge\n"
			       "gpugate_nodes_out_seconds{flavor=\"h100\"} 0\n"
			       "# HELP gpugate_node_out_since_seconds "),
		  "%s", text);
	cr_assert_null(strstr(text, "gpugate_node_out_since_seconds{"));
	free(text);

	cr_assert_eq(inventory_node_put(inv, &out), 0);
	metrics_health_on(m);
	metrics_health_step(m, METRICS_HEALTH_MARK_OUT);
	metrics_health_step(m, METRICS_HEALTH_FAILED);
	metrics_health_step(m, METRICS_HEALTH_FAILED);
	metrics_health_step(NULL, METRICS_HEALTH_FAILED); /* no sink: a no-op */
	text = render(m, &(struct metrics_state){.api = true, .policy = p, .inventory = inv});
	cr_assert(strstr(text, "# TYPE gpugate_health_steps_total counter\n"
			       "gpugate_health_steps_total{step=\"mark_out\"} 1\n"
			       "gpugate_health_steps_total{step=\"validate\"} 0\n"
			       "gpugate_health_steps_total{step=\"return\"} 0\n"
			       "gpugate_health_steps_total{step=\"fix_taint\"} 0\n"
			       "gpugate_health_steps_total{step=\"failed\"} 2\n"),
		  "%s", text);
	cr_assert(strstr(text, "gpugate_node_out_since_seconds{flavor=\"h100\",node=\"h0\","
			       "state=\"validating\"} 1000\n"),
		  "%s", text);
	at = strstr(text, "gpugate_nodes_out_seconds{flavor=\"h100\"} ");
	cr_assert_not_null(at);
	/* Out since 1970-01-01T00:16:40Z: decades. */
	cr_assert_gt(strtoll(at + strlen("gpugate_nodes_out_seconds{flavor=\"h100\"} "), NULL, 10),
		     1700000000LL);
	free(text);
	metrics_free(m);
	inventory_free(inv);
	policy_free(p);
}
