/* The loaded policy: defaults, lookups, namespace globs (policy/model.c). */
#include "base/diag.h"
#include "policy/policy.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct policy *parse(const char *yaml)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_parse("t.yaml", yaml, strlen(yaml), &p, &d), 0, "%s",
		     diag_text(&d));
	return p;
}

static struct policy *example(void)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_load("policy/examples/gpu-cluster.yaml", &p, &d), 0,
		     "%s", diag_text(&d));
	return p;
}

Test(model, checkpoint_claim_and_its_defaults)
{
	struct policy *p = parse(
		"version: 1\nflavors: []\nclasses: []\ntenants: []\n"
		"checkpoint:\n  claimName: \"{tenant}-checkpoints\"\n"
		"  claim:\n    create: true\n");
	const struct policy_checkpoint_claim *cl = &policy_checkpoint(p)->claim;

	cr_assert(cl->create);
	cr_assert_null(cl->storage_class, "the cluster's default StorageClass");
	cr_assert_str_eq(cl->size, "10Gi");
	cr_assert_eq(cl->n_access_modes, 1);
	cr_assert_str_eq(cl->access_modes[0], "ReadWriteMany");
	policy_free(p);
	p = parse("version: 1\nflavors: []\nclasses: []\ntenants: []\n"
		  "settings: {admissionWarnings: all}\n"
		  "checkpoint:\n  claimName: ckpt\n"
		  "  claim: {create: false, storageClassName: \"\", size: 1.5Gi,\n"
		  "          accessModes: [ReadWriteOncePod, ReadWriteOnce]}\n");
	cl = &policy_checkpoint(p)->claim;
	cr_assert_eq(policy_settings(p)->admission_warnings, POLICY_WARNINGS_ALL);
	cr_assert_not(cl->create);
	cr_assert_str_eq(cl->storage_class, "", "no class: a PersistentVolume made for it");
	cr_assert_str_eq(cl->size, "1.5Gi");
	cr_assert_eq(cl->n_access_modes, 2);
	cr_assert_str_eq(cl->access_modes[0], "ReadWriteOncePod");
	cr_assert_str_eq(cl->access_modes[1], "ReadWriteOnce");
	policy_free(p);
}

Test(model, applies_defaults)
{
	struct policy *p = parse(
		"version: 1\n"
		"flavors:\n  - {name: f, resource: x.io/g, sharing: mps, gpusPerNode: 4}\n"
		"classes:\n  - {name: c, flavor: f, gpus: 2}\n"
		"tenants:\n  - {name: t, namespaces: [ns], quota: [{flavor: f, nominal: 3}]}\n");
	const struct policy_settings *s = policy_settings(p);
	const struct policy_checkpoint *ck = policy_checkpoint(p);
	const struct policy_class *c = policy_class_find(p, "c");
	const struct policy_tenant *t = policy_tenant_find(p, "t");
	const struct policy_quota *q;

	cr_assert_str_eq(s->class_label, "gpugate.io/class");
	cr_assert_str_eq(s->gpus_label, "gpugate.io/gpus");
	cr_assert_eq(s->raw_gpu_requests, POLICY_RAW_REJECT);
	cr_assert_eq(s->mode, POLICY_MODE_ENFORCE);
	cr_assert_eq(s->admission_warnings, POLICY_WARNINGS_PROBLEMS);
	cr_assert_eq(ck->grace_period_seconds, 300);
	cr_assert_not(ck->claim.create, "gpugate creates no claim unless told");
	cr_assert_str_eq(ck->mount_path, "/checkpoint");
	cr_assert_null(ck->claim_name);
	cr_assert_eq(ck->n_pre_stop, 0);
	cr_assert_eq(ck->n_env, 0);
	cr_assert_eq(c->max_gpus, 2, "maxGpus defaults to gpus");
	cr_assert_null(c->cpu);
	cr_assert_eq(c->topology_mode, POLICY_TOPOLOGY_NONE);
	cr_assert_not(c->preemptible);
	cr_assert_str_eq(c->description, "");
	cr_assert(t->all_classes);
	cr_assert(policy_tenant_allows_class(t, c));
	for (int m = 0; m < POLICY_SHARING__COUNT; m++)
		cr_assert(policy_tenant_allows_sharing(t, (enum policy_sharing)m));
	cr_assert_null(t->cohort);
	cr_assert_eq(t->cohort_index, -1);
	cr_assert_eq(t->mode, POLICY_MODE_ENFORCE);
	q = policy_tenant_quota(t, c->flavor);
	cr_assert_not_null(q);
	cr_assert_eq(q->nominal, 3);
	cr_assert_eq(q->borrowing_limit, POLICY_NO_LIMIT);
	cr_assert_eq(q->lending_limit, POLICY_NO_LIMIT);
	policy_free(p);
}

Test(model, loads_the_example)
{
	struct policy *p = example();
	const struct policy_flavor *h100 = policy_flavor_find(p, "h100-80gb");
	const struct policy_flavor *mig = policy_flavor_find(p, "a100-1g.10gb");
	const struct policy_class *large = policy_class_find(p, "train-large");
	const struct policy_tenant *research = policy_tenant_find(p, "research");
	const struct policy_tenant *sandbox = policy_tenant_find(p, "sandbox");
	const struct policy_quota *q;

	cr_assert_eq(policy_flavor_count(p), 4);
	cr_assert_eq(policy_class_count(p), 5);
	cr_assert_eq(policy_tenant_count(p), 3);
	cr_assert_eq(policy_cohort_count(p), 1);
	cr_assert_str_eq(policy_cohort_name(p, 0), "lab");

	cr_assert_str_eq(h100->resource, "nvidia.com/gpu");
	cr_assert_eq(h100->sharing, POLICY_SHARING_EXCLUSIVE);
	cr_assert_eq(h100->gpus_per_node, 8);
	cr_assert_eq(h100->n_node_selector, 1);
	cr_assert_str_eq(h100->node_selector[0].key, "nvidia.com/gpu.product");
	cr_assert_str_eq(h100->node_selector[0].value, "NVIDIA-H100-80GB-HBM3");
	cr_assert_eq(h100->n_tolerations, 1);
	cr_assert_str_eq(h100->tolerations[0].key, "nvidia.com/gpu");
	cr_assert_str_eq(h100->tolerations[0].op, "Exists");
	cr_assert_str_eq(h100->tolerations[0].value, "");
	cr_assert_str_eq(h100->tolerations[0].effect, "NoSchedule");
	cr_assert_not(h100->tolerations[0].has_seconds);
	cr_assert_eq(mig->sharing, POLICY_SHARING_MIG);
	cr_assert_eq(mig->n_node_selector, 2);

	cr_assert_eq(large->flavor, h100);
	cr_assert_eq(large->gpus, 8);
	cr_assert_str_eq(large->cpu, "96");
	cr_assert_str_eq(large->memory, "1000Gi");
	cr_assert_str_eq(large->topology_key, "nvidia.com/gpu.clique");
	cr_assert_eq(large->topology_mode, POLICY_TOPOLOGY_REQUIRED);
	cr_assert_str_eq(large->priority_class_name, "training");
	cr_assert_eq(policy_class_find(p, "train-small")->max_gpus, 4);

	cr_assert_str_eq(research->cohort, "lab");
	cr_assert_not(research->all_classes);
	cr_assert(policy_tenant_allows_class(research, large));
	cr_assert_not(policy_tenant_allows_class(research,
						 policy_class_find(p, "inference-mig")));
	cr_assert(policy_tenant_allows_sharing(research, POLICY_SHARING_EXCLUSIVE));
	cr_assert_not(policy_tenant_allows_sharing(research, POLICY_SHARING_MIG));
	q = policy_tenant_quota(research, h100);
	cr_assert_eq(q->nominal, 32);
	cr_assert_eq(q->borrowing_limit, 16);
	cr_assert_eq(q->lending_limit, 8);
	cr_assert_null(policy_tenant_quota(research, mig));
	cr_assert_eq(sandbox->mode, POLICY_MODE_WARN);

	const struct policy_checkpoint *ck = policy_checkpoint(p);
	cr_assert_eq(ck->grace_period_seconds, 600);
	cr_assert_str_eq(ck->claim_name, "{tenant}-checkpoints");
	cr_assert_eq(ck->n_pre_stop, 3);
	cr_assert_str_eq(ck->pre_stop[2], "kill -TERM 1; sleep 30");
	cr_assert_eq(ck->n_env, 1);
	cr_assert_str_eq(ck->env[0].key, "GPUGATE_CHECKPOINT_DIR");
	cr_assert_str_eq(ck->env[0].value, "/checkpoint");
	policy_free(p);
}

Test(model, finds_flavors_by_resource)
{
	struct policy *p = example();
	const struct policy_flavor *out[4];

	cr_assert_eq(policy_flavors_for_resource(p, "nvidia.com/gpu", out, 4), 1);
	cr_assert_str_eq(out[0]->name, "h100-80gb");
	cr_assert(policy_is_flavor_resource(p, "nvidia.com/mig-3g.40gb"));
	cr_assert_not(policy_is_flavor_resource(p, "nvidia.com/mig-2g.20gb"));
	cr_assert_eq(policy_flavors_for_resource(p, "amd.com/gpu", out, 4), 0);
	policy_free(p);
}

struct ns_case {
	const char *ns;
	const char *tenant; /* NULL: none */
};

Test(model, maps_device_classes_to_flavors_and_knows_gpu_ones)
{
	struct policy *p = parse(
		"version: 1\n"
		"flavors:\n"
		"  - {name: h100, resource: nvidia.com/gpu, sharing: exclusive,\n"
		"     gpusPerNode: 8, deviceClassNames: [gpu.nvidia.com, h100.example.com]}\n"
		"  - {name: l4, resource: nvidia.com/gpu.shared, sharing: mps,\n"
		"     gpusPerNode: 8}\n"
		"classes: []\ntenants: []\n");
	const struct policy_settings *s = policy_settings(p);

	cr_assert_str_eq(policy_flavor_for_device_class(p, "gpu.nvidia.com")->name,
			 "h100");
	cr_assert_str_eq(policy_flavor_for_device_class(p, "h100.example.com")->name,
			 "h100");
	cr_assert_null(policy_flavor_for_device_class(p, "mig.nvidia.com"));
	cr_assert_eq(policy_flavor_find(p, "h100")->n_device_classes, 2);
	cr_assert_eq(policy_flavor_find(p, "l4")->n_device_classes, 0);
	/* The default GPU device classes: NVIDIA's DRA driver's. */
	cr_assert_eq(s->n_gpu_device_classes, 2);
	cr_assert_str_eq(s->gpu_device_classes[0], "gpu.nvidia.com");
	cr_assert_str_eq(s->gpu_device_classes[1], "mig.nvidia.com");
	cr_assert(policy_is_gpu_device_class(p, "mig.nvidia.com"), "a default");
	cr_assert(policy_is_gpu_device_class(p, "h100.example.com"), "mapped");
	cr_assert_not(policy_is_gpu_device_class(p, "nic.example.com"));
	policy_free(p);

	p = parse("version: 1\nsettings:\n  gpuDeviceClassNames: [tpu.example.com]\n"
		  "flavors: []\nclasses: []\ntenants: []\n");
	cr_assert(policy_is_gpu_device_class(p, "tpu.example.com"));
	cr_assert_not(policy_is_gpu_device_class(p, "gpu.nvidia.com"),
		      "the list replaces the defaults");
	policy_free(p);
}

Test(model, resolves_namespaces_first_match_wins)
{
	/* Order matters: the literal "team-b-special" in tenant "c" is never
	 * reached... so the file puts it first, before the glob of "b". */
	struct policy *p = parse(
		"version: 1\nflavors: []\nclasses: []\ntenants:\n"
		"  - {name: c, namespaces: [team-b-special]}\n"
		"  - {name: a, namespaces: [alpha, \"alpha-?\"]}\n"
		"  - {name: b, namespaces: [\"team-b-*\", \"b[0-9]\"]}\n"
		"  - {name: catchall, namespaces: [\"*\"]}\n");
	static const struct ns_case cases[] = {
		{"alpha", "a"},           {"alpha-1", "a"},
		{"alpha-12", "catchall"}, {"team-b-x", "b"},
		{"team-b-special", "c"},  {"b7", "b"},
		{"bb", "catchall"},       {"default", "catchall"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct policy_tenant *t =
			policy_tenant_for_namespace(p, cases[i].ns);

		cr_assert_not_null(t, "%s", cases[i].ns);
		cr_expect_str_eq(t->name, cases[i].tenant, "namespace %s",
				 cases[i].ns);
	}
	policy_free(p);
}

Test(model, literal_after_glob_of_later_tenant_wins)
{
	/* The glob belongs to a later tenant than the literal: literal wins. */
	struct policy *p = parse(
		"version: 1\nflavors: []\nclasses: []\ntenants:\n"
		"  - {name: lit, namespaces: [ml-prod]}\n"
		"  - {name: glob, namespaces: [\"ml-*\"]}\n");

	cr_assert_str_eq(policy_tenant_for_namespace(p, "ml-prod")->name, "lit");
	cr_assert_str_eq(policy_tenant_for_namespace(p, "ml-dev")->name, "glob");
	cr_assert_null(policy_tenant_for_namespace(p, "web"));
	policy_free(p);
}

Test(model, unknown_names_are_null)
{
	struct policy *p = example();

	cr_assert_null(policy_flavor_find(p, "h200"));
	cr_assert_null(policy_class_find(p, "train-huge"));
	cr_assert_null(policy_tenant_find(p, "finance"));
	cr_assert_null(policy_tenant_for_namespace(p, "kube-system"));
	cr_assert_null(policy_flavor_at(p, 99));
	policy_free(p);
}

Test(model, load_reports_missing_file)
{
	struct policy *p = NULL;
	struct diag d;

	diag_init(&d);
	cr_assert_eq(policy_load("/nonexistent/policy.yaml", &p, &d), -1);
	cr_assert_str_eq(diag_text(&d),
			 "/nonexistent/policy.yaml: cannot open: No such file or "
			 "directory\n");
}

Test(model, claim_name_replaces_placeholders_and_cuts_like_snprintf)
{
	char out[16];

	cr_assert_eq(policy_claim_name("{tenant}-{namespace}-x", "ml", "dev", out,
				       sizeof(out)),
		     8);
	cr_assert_str_eq(out, "ml-dev-x");
	/* Only the two placeholders are replaced. */
	cr_assert_eq(policy_claim_name("{team}{tenant", "ml", "dev", out,
				       sizeof(out)),
		     13);
	cr_assert_str_eq(out, "{team}{tenant");
	/* Too long: cut, and the whole length returned. */
	cr_assert_eq(policy_claim_name("{tenant}.{tenant}", "research", "x", out,
				       sizeof(out)),
		     17);
	cr_assert_str_eq(out, "research.resear");
	cr_assert_eq(policy_claim_name("ab", "t", "n", out, 1), 2);
	cr_assert_str_eq(out, "");
}

/* A file of size bytes of zeros (sparse: nothing is written). */
static void sized_file(char *path, size_t size)
{
	int fd;

	strcpy(path, "/tmp/gpugate-model-test-XXXXXX");
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

static void load_sized(size_t size, char *errors, size_t errsz)
{
	char path[64], line[160];
	struct policy *p = NULL;
	struct diag d;
	const char *text;

	sized_file(path, size);
	diag_init(&d);
	cr_assert_eq(policy_load(path, &p, &d), -1, "size %zu", size);
	unlink(path);
	/* The file name is random: keep what follows it. */
	text = diag_text(&d);
	cr_assert(strncmp(text, path, strlen(path)) == 0, "%s", text);
	diag_first(&d, line, sizeof(line));
	snprintf(errors, errsz, "%s", line + strlen(path));
}

Test(model, one_message_for_every_oversized_file)
{
	/* Just over the cap, and over twice the cap (a file that was once
	 * read in full and refused with other words). */
	static const size_t sizes[] = {POLICY_MAX_FILE_BYTES + 1u,
				       3u * (POLICY_MAX_FILE_BYTES / 2u),
				       40u << 20};
	char errors[160];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		load_sized(sizes[i], errors, sizeof(errors));
		cr_assert_str_eq(errors,
				 ": the file is larger than 16 MiB (16777216 bytes)",
				 "size %zu", sizes[i]);
	}
}

Test(model, a_file_of_exactly_the_cap_is_read)
{
	char errors[160];

	/* 16 MiB of NUL bytes: refused by the YAML reader, not for its size. */
	load_sized(POLICY_MAX_FILE_BYTES, errors, sizeof(errors));
	cr_assert(strstr(errors, "larger than") == NULL, "%s", errors);
	cr_assert(strstr(errors, "YAML syntax error") != NULL, "%s", errors);
}

Test(model, free_null_is_a_no_op)
{
	policy_free(NULL);
}

/* health.onUnhealthy, returnAfter, drainedBy (the health loop). */
Test(model, the_health_loop_keys_and_their_defaults)
{
	static const char base[] = "version: 1\nflavors: []\nclasses: []\ntenants: []\n";
	struct policy *p = parse(base);
	const struct policy_health *h = policy_health(p);

	cr_expect_eq(h->on_unhealthy, 0, "checkpoint");
	cr_expect_null(h->return_label_key);
	cr_expect_eq(h->return_settle_s, 0);
	cr_assert_eq(h->n_drained_by, 1);
	cr_expect_str_eq(h->drained_by[0].key, "dgxc.nvidia.com/nvsentinel-state");
	cr_expect_null(h->drained_by[0].value);
	policy_free(p);

	p = parse("version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n"
		  "  onUnhealthy: signal\n"
		  "  returnAfter: {validationLabel: \"example.com/diag=pass\", "
		  "settleSeconds: 600}\n"
		  "  drainedBy: [\"example.com/drain\"]\n");
	h = policy_health(p);
	cr_expect_eq(h->on_unhealthy, 1, "signal");
	cr_expect_str_eq(h->return_label_key, "example.com/diag");
	cr_expect_str_eq(h->return_label_value, "pass");
	cr_expect_eq(h->return_settle_s, 600);
	cr_assert_eq(h->n_drained_by, 2, "the default and the file's");
	cr_expect_str_eq(h->drained_by[1].key, "example.com/drain");
	policy_free(p);

	p = parse("version: 1\nflavors: []\nclasses: []\ntenants: []\nhealth:\n"
		  "  defaults: false\n  onUnhealthy: none\n"
		  "  returnAfter: {validationLabel: \"example.com/diag\"}\n");
	h = policy_health(p);
	cr_expect_eq(h->on_unhealthy, 2, "none");
	cr_expect_str_eq(h->return_label_key, "example.com/diag");
	cr_expect_null(h->return_label_value, "any value");
	cr_expect_eq(h->n_drained_by, 0);
	policy_free(p);
}
