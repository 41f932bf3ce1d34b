/* controllers/gang-probe.c: the objects it dry-runs and what the answers
 * say (docs/design/gang-start.md F6, and its "Seen on a running v1.37.2
 * apiserver" rows 1-5 and 33). */
#include "controllers/gang-probe.h"
#include "policy/gang.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>

static json_t *parse(const char *json)
{
	json_error_t e;
	json_t *v = json_loads(json, 0, &e);

	cr_assert_not_null(v, "bad test JSON: %s", e.text);
	return v;
}

static enum gang_probe_answer ask(enum gang_probe_answer (*fn)(long, const json_t *),
				  long status, const char *json)
{
	json_t *body = json ? parse(json) : NULL;
	enum gang_probe_answer a = fn(status, body);

	json_decref(body);
	return a;
}

/* kubectl get --raw /apis/scheduling.k8s.io/v1beta1 on cluster A. */
static const char served[] =
	"{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":"
	"\"scheduling.k8s.io/v1beta1\",\"resources\":["
	"{\"name\":\"podgroups\",\"singularName\":\"podgroup\",\"namespaced\":true,"
	"\"kind\":\"PodGroup\",\"verbs\":[\"create\",\"delete\",\"get\",\"list\"]},"
	"{\"name\":\"podgroups/status\",\"singularName\":\"\",\"namespaced\":true,"
	"\"kind\":\"PodGroup\",\"verbs\":[\"get\",\"patch\",\"update\"]},"
	"{\"name\":\"workloads\",\"singularName\":\"workload\",\"namespaced\":true,"
	"\"kind\":\"Workload\",\"verbs\":[\"create\",\"get\"]}]}";

Test(gang_probe, discovery_wants_workloads_and_podgroups)
{
	cr_expect_eq(ask(gang_probe_discovery, 200, served), GANG_PROBE_YES);
	cr_expect_eq(ask(gang_probe_discovery, 404,
			 "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"code\":404}"),
		     GANG_PROBE_NO, "404: the version is not served");
	cr_expect_eq(ask(gang_probe_discovery, 200,
			 "{\"resources\":[{\"name\":\"podgroups\"},"
			 "{\"name\":\"podgroups/status\"}]}"),
		     GANG_PROBE_NO, "podgroups without workloads");
	cr_expect_eq(ask(gang_probe_discovery, 200,
			 "{\"resources\":[{\"name\":\"workloads\"}]}"),
		     GANG_PROBE_NO);
	cr_expect_eq(ask(gang_probe_discovery, 200, "{\"resources\":[]}"), GANG_PROBE_NO);
	cr_expect_eq(ask(gang_probe_discovery, 200, "{}"), GANG_PROBE_NO);
	cr_expect_eq(ask(gang_probe_discovery, 200,
			 "{\"resources\":[{\"name\":7},{\"name\":\"workloads\"},"
			 "{\"kind\":\"x\"},{\"name\":\"podgroups\"}]}"),
		     GANG_PROBE_YES, "odd entries skipped");
	cr_expect_eq(ask(gang_probe_discovery, 403, "{\"kind\":\"Status\"}"),
		     GANG_PROBE_UNKNOWN, "403 says nothing");
	cr_expect_eq(ask(gang_probe_discovery, 503, NULL), GANG_PROBE_UNKNOWN);
	cr_expect_eq(ask(gang_probe_discovery, -1, NULL), GANG_PROBE_UNKNOWN,
		     "no answer");
	cr_expect_eq(ask(gang_probe_discovery, 200, "[]"), GANG_PROBE_UNKNOWN,
		     "not a resource list");
}

Test(gang_probe, the_job_dry_run_kept_or_dropped)
{
	/* Cluster A: 201, spec.scheduling kept as sent. */
	cr_expect_eq(ask(gang_probe_job, 201,
			 "{\"kind\":\"Job\",\"spec\":{\"parallelism\":2,\"scheduling\":"
			 "{\"schedulingPolicy\":{\"gang\":{\"minCount\":2}}}}}"),
		     GANG_PROBE_YES);
	cr_expect_eq(ask(gang_probe_job, 201,
			 "{\"spec\":{\"scheduling\":{\"schedulingPolicy\":{\"gang\":{}}}}}"),
		     GANG_PROBE_YES, "gang: {} is kept too");
	/* Cluster B: 201, the field dropped silently. */
	cr_expect_eq(ask(gang_probe_job, 201,
			 "{\"kind\":\"Job\",\"spec\":{\"parallelism\":2,\"suspend\":true}}"),
		     GANG_PROBE_NO);
	cr_expect_eq(ask(gang_probe_job, 201,
			 "{\"spec\":{\"scheduling\":{\"schedulingPolicy\":{\"basic\":{}}}}}"),
		     GANG_PROBE_NO, "another policy is no gang");
	cr_expect_eq(ask(gang_probe_job, 200,
			 "{\"spec\":{\"scheduling\":{\"schedulingPolicy\":{\"gang\":{}}}}}"),
		     GANG_PROBE_YES);
	cr_expect_eq(ask(gang_probe_job, 422,
			 "{\"kind\":\"Status\",\"reason\":\"Invalid\"}"),
		     GANG_PROBE_NO, "refused: not served as gpugate writes it");
	cr_expect_eq(ask(gang_probe_job, 403, "{\"kind\":\"Status\"}"), GANG_PROBE_UNKNOWN);
	cr_expect_eq(ask(gang_probe_job, 404, "{\"kind\":\"Status\"}"), GANG_PROBE_UNKNOWN,
		     "no namespace: says nothing of the field");
	cr_expect_eq(ask(gang_probe_job, 409, "{\"kind\":\"Status\"}"), GANG_PROBE_UNKNOWN,
		     "a real Job of the name");
	cr_expect_eq(ask(gang_probe_job, 500, NULL), GANG_PROBE_UNKNOWN);
	cr_expect_eq(ask(gang_probe_job, -1, NULL), GANG_PROBE_UNKNOWN);
}

Test(gang_probe, the_podgroup_dry_run_keeps_topology_or_not)
{
	cr_expect_eq(ask(gang_probe_topology, 201,
			 "{\"kind\":\"PodGroup\",\"spec\":{\"schedulingPolicy\":{\"gang\":"
			 "{\"minCount\":2}},\"schedulingConstraints\":{\"topology\":"
			 "[{\"key\":\"kubernetes.io/hostname\"}]}}}"),
		     GANG_PROBE_YES);
	/* Cluster C: created without it. */
	cr_expect_eq(ask(gang_probe_topology, 201,
			 "{\"kind\":\"PodGroup\",\"spec\":{\"schedulingPolicy\":{\"gang\":"
			 "{\"minCount\":2}}}}"),
		     GANG_PROBE_NO);
	cr_expect_eq(ask(gang_probe_topology, 201,
			 "{\"spec\":{\"schedulingConstraints\":{\"topology\":[]}}}"),
		     GANG_PROBE_NO, "emptied");
	cr_expect_eq(ask(gang_probe_topology, 201,
			 "{\"spec\":{\"schedulingConstraints\":{}}}"),
		     GANG_PROBE_NO);
	cr_expect_eq(ask(gang_probe_topology, 422, "{\"kind\":\"Status\"}"), GANG_PROBE_NO);
	cr_expect_eq(ask(gang_probe_topology, 403, "{\"kind\":\"Status\"}"),
		     GANG_PROBE_UNKNOWN);
	cr_expect_eq(ask(gang_probe_topology, -1, NULL), GANG_PROBE_UNKNOWN);
}

Test(gang_probe, the_bits_keep_what_an_answer_did_not_say)
{
	const enum gang_probe_answer Y = GANG_PROBE_YES, N = GANG_PROBE_NO,
				     U = GANG_PROBE_UNKNOWN;
	const unsigned K = GANG_SERVES_KNOWN, C = GANG_SERVES_CONTROLLER,
		       J = GANG_SERVES_JOB_SCHEDULING, P = GANG_SERVES_PODGROUP,
		       T = GANG_SERVES_TOPOLOGY;

	cr_expect_eq(gang_probe_bits(0, U, U, U), C, "nothing said: not known");
	cr_expect_eq(gang_probe_bits(0, N, N, N), K | C, "cluster B");
	cr_expect_eq(gang_probe_bits(0, Y, Y, Y), K | C | J | P | T, "cluster A");
	cr_expect_eq(gang_probe_bits(0, Y, Y, N), K | C | J | P, "cluster C");
	cr_expect_eq(gang_probe_bits(0, N, U, Y), K | C,
		     "no podgroups: no topology, whatever was said");
	cr_expect_eq(gang_probe_bits(K | C | J | P | T, U, U, U), K | C | J | P | T,
		     "a failed probe keeps every bit");
	cr_expect_eq(gang_probe_bits(K | C | J | P | T, U, N, U), K | C | P | T,
		     "one answer changes its bit only");
	cr_expect_eq(gang_probe_bits(K | C | J | P | T, N, U, U), K | C | J,
		     "podgroups gone: topology with them");
	cr_expect_eq(gang_probe_bits(K | C, U, U, U), K | C, "known stays known");
	cr_expect_eq(gang_probe_bits(0, U, Y, U), K | C | J);
}

static void expect_json(json_t *got, const char *want)
{
	json_t *exp = parse(want);
	char *dump = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);

	cr_assert_not_null(got);
	cr_expect(json_equal(got, exp), "got %s", dump);
	free(dump);
	json_decref(exp);
	json_decref(got);
}

Test(gang_probe, the_objects_dry_run)
{
	expect_json(gang_probe_job_object(),
		    "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":"
		    "{\"name\":\"gpugate-gang-probe\"},\"spec\":{\"parallelism\":2,"
		    "\"completions\":2,\"suspend\":true,\"scheduling\":"
		    "{\"schedulingPolicy\":{\"gang\":{\"minCount\":2}}},\"template\":"
		    "{\"spec\":{\"containers\":[{\"name\":\"probe\",\"image\":"
		    "\"gpugate.invalid/probe\"}],\"restartPolicy\":\"Never\"}}}}");
	expect_json(gang_probe_podgroup_object(),
		    "{\"apiVersion\":\"scheduling.k8s.io/v1beta1\",\"kind\":\"PodGroup\","
		    "\"metadata\":{\"name\":\"gpugate-gang-probe\"},\"spec\":"
		    "{\"schedulingPolicy\":{\"gang\":{\"minCount\":2}},"
		    "\"schedulingConstraints\":{\"topology\":[{\"key\":"
		    "\"kubernetes.io/hostname\"}]}}}");
}
