/*
 * Reproducers of what the fuzz harnesses (tests/fuzz/) found in webhook/:
 * the request path, as the server answers it (handler_admit, the example
 * policy, no quota source), and the kubeconfig reader.  The input files are
 * kept in the fuzz corpus too (tests/fuzz/corpus/NAME/crash-*), so that
 * tests/fuzz/run.sh replays them.
 */
#include "base/diag.h"
#include "base/log.h"
#include "codec/jsonmem.h"
#include "kube/config.h"
#include "policy/policy.h"
#include "webhook/handler.h"
#include "webhook/holder.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLICY "policy/examples/gpu-cluster.yaml"

/* Sends body to ep and returns the decoded response review (or fails). */
static json_t *admit(enum handler_endpoint ep, const char *body)
{
	struct policy *p = NULL;
	struct holder *holder;
	struct handler h = {0};
	struct handler_reply reply;
	struct diag d;
	json_t *resp;

	log_set_level(LOG_ERROR);
	diag_init(&d);
	cr_assert_eq(policy_load(POLICY, &p, &d), 0, "%s", diag_text(&d));
	holder = holder_new(p);
	cr_assert_not_null(holder);
	h.policy = holder;
	handler_admit(&h, ep, body, strlen(body), &reply);
	cr_assert_eq(reply.status, 200, "HTTP %d: %.*s", reply.status,
		     (int)reply.len, reply.body ? reply.body : "");
	resp = json_loadb(reply.body, reply.len, 0, NULL);
	cr_assert_not_null(resp, "%.*s", (int)reply.len, reply.body);
	free(reply.body);
	holder_free(holder);
	return resp;
}

/*
 * tests/fuzz/corpus/review/crash-label-key-cut-inside-utf8: a label whose
 * value is not a string and whose key has a two-byte character at bytes
 * 60-61.  facts.c quotes the key as "%.60s", which cuts the character in
 * half; the message is then not UTF-8, jansson refuses it, review_encode()
 * returns NULL and the server answers 500 "gpugate: out of memory" instead
 * of the 400 denial that names the field.
 */
Test(fuzz_regress, malformed_label_key_cut_inside_utf8_is_a_400_denial)
{
	static const char body[] =
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
		"\"request\":{\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\","
		"\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"object\":{\"metadata\":"
		"{\"labels\":{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"\xc3\xa9\":1}}}}}";
	enum handler_endpoint eps[] = {HANDLER_MUTATE, HANDLER_VALIDATE};

	for (size_t i = 0; i < 2; i++) {
		json_t *resp = admit(eps[i], body);
		json_t *r = json_object_get(resp, "response");
		const char *msg = json_string_value(
			json_object_get(json_object_get(r, "status"), "message"));

		cr_assert(json_is_false(json_object_get(r, "allowed")));
		cr_assert_eq(json_integer_value(json_object_get(
				     json_object_get(r, "status"), "code")),
			     400);
		cr_assert_not_null(msg);
		cr_assert(strncmp(msg, "gpugate: malformed Pod: metadata.labels[\"aaa",
				  44) == 0,
			  "%s", msg);
		cr_assert(strstr(msg, "is not a string"), "%s", msg);
		json_decref(resp);
	}
}

/* Loads a kubeconfig written to a temporary file. */
static int load_kubeconfig(const char *yaml, struct kube_config *c,
			   struct diag *d)
{
	char dir[] = "/tmp/gpugate-fuzz-regress-XXXXXX", path[64];
	FILE *f;
	int rc;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/config", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_geq(fputs(yaml, f), 0);
	cr_assert_eq(fclose(f), 0);
	diag_init(d);
	rc = kube_config_load(path, c, d);
	unlink(path);
	rmdir(dir);
	return rc;
}

/*
 * tests/fuzz/corpus/kubeconfig/crash-server-trailing-slashes: kube.h says
 * the server has no trailing slash (kube_get() appends paths that start
 * with "/"), but kube_config_load() drops only one: "https://h//" stays
 * "https://h/" and requests go to "https://h//api/...".
 */
Test(fuzz_regress, kubeconfig_server_loses_every_trailing_slash)
{
	struct kube_config c;
	struct diag d;
	char server[64];

	cr_assert_eq(load_kubeconfig("current-context: x\n"
				     "contexts: [{name: x, context: {cluster: c}}]\n"
				     "clusters: [{name: c, cluster: {server: "
				     "\"https://h:6443//\"}}]\n",
				     &c, &d),
		     0, "%s", diag_text(&d));
	snprintf(server, sizeof(server), "%s", c.server);
	kube_config_release(&c); /* before asserting: no leak report */
	cr_assert_str_eq(server, "https://h:6443");
}

/*
 * tests/fuzz/corpus/kubeconfig/crash-server-without-host: "https://" is
 * accepted, and the trailing-slash cut turns it into "https:/", a server
 * that does not even start with "https://".  It has no host: refuse it
 * like a server that is not https.
 */
Test(fuzz_regress, kubeconfig_server_without_host_is_refused)
{
	struct kube_config c;
	struct diag d;
	char server[64] = "";
	int rc;

	rc = load_kubeconfig("current-context: x\n"
			     "contexts: [{name: x, context: {cluster: c}}]\n"
			     "clusters: [{name: c, cluster: {server: "
			     "\"https://\"}}]\n",
			     &c, &d);
	if (rc == 0) {
		snprintf(server, sizeof(server), "%s", c.server);
		kube_config_release(&c); /* before asserting: no leak report */
	}
	cr_assert_eq(rc, -1, "accepted as server \"%s\"", server);
	cr_assert(strstr(diag_text(&d), "cluster \"c\" has no https server"),
		  "%s", diag_text(&d));
}

/*
 * Found while setting up review_fuzz: jsonmem.h promises that under
 * AddressSanitizer every jansson block stays a malloc() of its own (so
 * that use-after-free and leaks of request values are caught), but
 * jsonmem_install() tests only __SANITIZE_ADDRESS__, which GCC defines and
 * clang 14 does not (clang has __has_feature(address_sanitizer)).  Built
 * with clang and -fsanitize=address the arena is on and ASan sees none of
 * the request's values.  Fails under `make CC=clang SANITIZER=address`;
 * elsewhere it checks nothing.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#endif

#ifdef UNDER_ASAN
/* <sanitizer/allocator_interface.h>, which Debian's GCC does not ship. */
int __sanitizer_get_ownership(const volatile void *p);
#endif

Test(fuzz_regress, jsonmem_arena_is_off_under_address_sanitizer)
{
#ifdef UNDER_ASAN
	json_t *a, *b;
	bool own_a, own_b;

	jsonmem_install();
	jsonmem_begin();
	a = json_string("first");
	b = json_string("second");
	cr_assert(a && b);
	/* A block of its own is the start of an ASan heap chunk. */
	own_a = __sanitizer_get_ownership(a);
	own_b = __sanitizer_get_ownership(b);
	json_decref(a);
	json_decref(b);
	jsonmem_end();
	cr_assert(own_a && own_b,
		  "jansson allocates from the jsonmem arena under ASan");
#else
	cr_skip_test("not built with AddressSanitizer");
#endif
}
