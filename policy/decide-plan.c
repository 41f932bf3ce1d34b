/*
 * decide: what follows the quota outcome: the stamps and the gang id, the
 * plan of what /mutate changes (mapping, checkpoint hooks), the quota
 * messages of a template and of lent-out quota, and the lines /validate
 * says of what it admits (decide_finish()).
 */
#include "policy/decide-int.h"

#include "policy/dra-template.h"

#include "base/hash.h"
#include "base/text.h"
#include "policy/kinds.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAX_POD_FAILURE_RULES 20

/* ---- stamps ----------------------------------------------------------- */

static bool has_stamps(const struct wl_kv *labels, size_t nl,
		       const struct wl_kv *ann, size_t na)
{
	static const char *const label_keys[] = {STAMP_TENANT, STAMP_FLAVOR,
						 STAMP_PREEMPTIBLE, STAMP_GANG};
	static const char *const ann_keys[] = {STAMP_DECISION, STAMP_BORROWED};

	for (size_t i = 0; i < sizeof(label_keys) / sizeof(label_keys[0]); i++)
		if (wl_get(labels, nl, label_keys[i]))
			return true;
	for (size_t i = 0; i < sizeof(ann_keys) / sizeof(ann_keys[0]); i++)
		if (wl_get(ann, na, ann_keys[i]))
			return true;
	return false;
}

static bool workload_has_stamps(const struct workload *wl)
{
	return has_stamps(wl->pod.labels, wl->pod.n_labels, wl->pod.annotations,
			  wl->pod.n_annotations) ||
	       (wl->kind == WL_JOB && has_stamps(wl->labels, wl->n_labels,
						 wl->annotations, wl->n_annotations));
}

static bool gang_well_formed(const char *g)
{
	if (!g || strlen(g) != 18 || strncmp(g, "g-", 2) != 0)
		return false;
	for (const char *c = g + 2; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/*
 * The gang id of a Job: derived from its namespace and name, or from the
 * request when the name is still to be generated (re-invocations of one
 * request agree).  Never taken from the user: a forged id could join
 * another Job's gang.  A Job's pod keeps the id its template gave it, or
 * derives it from its Job the same way.
 */
static void gang_id(const struct workload *wl, char *out, size_t size)
{
	const char *have = wl_get(wl->pod.labels, wl->pod.n_labels, STAMP_GANG);
	uint64_t h = HASH_FNV1A_SEED;

	if (wl->kind == WL_POD && gang_well_formed(have)) {
		snprintf(out, size, "%s", have);
		return;
	}
	h = hash_fnv1a(h, wl->namespace);
	h = hash_fnv1a(h, "/");
	if (wl->kind == WL_POD) {
		h = hash_fnv1a(h, wl->owner_job);
	} else if (wl->name && wl->name[0]) {
		h = hash_fnv1a(h, wl->name);
	} else {
		h = hash_fnv1a(h, "/");
		h = hash_fnv1a(h, wl->request_uid);
	}
	snprintf(out, size, "g-%016" PRIx64, h);
}

/* ---- plan and messages after quota ------------------------------------ */

static bool pre_stop_is_ours(const struct policy_checkpoint *ck,
			     const struct wl_container *ct)
{
	if (ct->n_pre_stop_exec != ck->n_pre_stop || !ck->n_pre_stop)
		return false;
	for (size_t i = 0; i < ck->n_pre_stop; i++)
		if (!ct->pre_stop_exec[i] ||
		    strcmp(ct->pre_stop_exec[i], ck->pre_stop[i]) != 0)
			return false;
	return true;
}

/*
 * gpugate check has tried the claim name with every tenant: only the
 * namespace can still spoil it, by its length, or by being no valid name
 * (the apiserver never sends one; gpugate explain --namespace may).  The
 * volume is then an emptyDir, with a warning that says why.
 */
static void plan_claim_name(struct ctx *c, const char *tmpl)
{
	const char *ns = c->wl->namespace;
	char *name = c->out->plan.claim_name;
	const size_t size = sizeof(c->out->plan.claim_name);
	char shown[DECIDE_WARNING_LEN];

	switch (policy_checkpoint_claim(c->p, c->out->tenant, ns, name, size)) {
	case POLICY_CLAIM_TOO_LONG:
		decide_add_warning(c->out,
			    "gpugate: checkpoint claim name for namespace %.63s is "
			    "longer than the %zu characters of a PersistentVolumeClaim "
			    "name; using an emptyDir volume",
			    ns, size - 1);
		break;
	case POLICY_CLAIM_INVALID:
		policy_claim_name(tmpl, c->out->tenant->name, ns, shown, sizeof(shown));
		decide_add_warning(c->out,
			    "gpugate: checkpoint claim name \"%.80s\" for namespace "
			    "%.63s is not a valid PersistentVolumeClaim name; using an "
			    "emptyDir volume",
			    shown, ns);
		break;
	default:
		break;
	}
}

static bool signal_volume_is_ours(const struct wl_volume *v)
{
	return v->downward_path && strcmp(v->downward_path, SIGNAL_ITEM) == 0 &&
	       v->downward_field && strcmp(v->downward_field, SIGNAL_FIELD_PATH) == 0;
}

/*
 * The checkpoint signal: what the user already has under its name or at
 * its path is kept (apply.c), with a warning when it is not gpugate's own,
 * since $GPUGATE_CHECKPOINT_SIGNAL may then never show a request.
 */
static void plan_signal(struct ctx *c)
{
	const struct wl_pod *pod = &c->wl->pod;

	c->out->plan.signal = true;
	for (size_t i = 0; i < pod->n_volumes; i++)
		if (pod->volumes[i].name &&
		    strcmp(pod->volumes[i].name, SIGNAL_VOLUME) == 0 &&
		    !signal_volume_is_ours(&pod->volumes[i]))
			decide_add_warning(c->out,
				    "gpugate: the pod keeps its own volume \"" SIGNAL_VOLUME
				    "\"; " SIGNAL_FILE " may not show checkpoint requests");
	for (size_t i = 0; i < pod->n_containers; i++) {
		const struct wl_container *ct = &pod->containers[i];
		bool ours = false, other = false;

		for (size_t m = 0; m < ct->n_mounts; m++) {
			bool named = ct->mounts[m].volume &&
				     strcmp(ct->mounts[m].volume, SIGNAL_VOLUME) == 0;
			bool at = ct->mounts[m].path &&
				  strcmp(ct->mounts[m].path, SIGNAL_MOUNT_PATH) == 0;

			if (named && at && !ct->mounts[m].sub_path)
				ours = true;
			else if (named || at)
				other = true;
		}
		if (other && !ours)
			decide_add_warning(c->out,
				    "gpugate: container \"%.63s\" keeps its own mount of "
				    "\"" SIGNAL_VOLUME "\" or at " SIGNAL_MOUNT_PATH
				    "; it may not see checkpoint requests",
				    ct->name ? ct->name : "");
	}
}

/*
 * The checkpoint volume mounts the claim pl->claim_name: pods that mount a
 * claim that does not exist never start, so a claim known to be missing is
 * not mounted at all (the rest of the hooks stay); where the claims are
 * not known (no API, not listed yet) it is mounted as the policy says.
 * Pods of one workload on several nodes need it ReadWriteMany.  Said once
 * per workload (not for each pod of a Job, which is planned all the same:
 * its claim may have been created since its Job).
 */
static void check_checkpoint_claim(struct ctx *c)
{
	const struct workload *wl = c->wl;
	struct plan *pl = &c->out->plan;
	int64_t pods = wl->kind == WL_JOB ? wl->parallelism
		       : wl->kind == WL_TEMPLATE ? (wl->def->pods == KIND_PODS_PER_NODE
							    ? 2 /* one per node */
							    : wl->replicas)
					       : 1;
	enum pvc_state st;

	if (!c->in->pvcs || !pl->claim_name[0])
		return;
	st = c->in->pvcs->state(c->in->pvcs->ctx, wl->namespace, pl->claim_name);
	pl->no_volume = st == PVC_MISSING;
	if (wl->kind == WL_POD && wl->owner_job)
		return;
	if (st == PVC_MISSING)
		decide_add_warning(c->out,
			    "gpugate: checkpoint volume not mounted: PersistentVolumeClaim "
			    "\"%.63s\" does not exist in namespace %.63s; what is written "
			    "to %.63s is lost with the pod; %s",
			    pl->claim_name, wl->namespace,
			    policy_checkpoint(c->p)->mount_path,
			    policy_checkpoint(c->p)->claim.create
				    ? "gpugate creates it (checkpoint.claim.create), "
				      "wait a moment and create the workload again"
				    : "create it or set checkpoint.claim.create");
	else if (st == PVC_ONE_NODE && pods > 1)
		decide_add_warning(c->out,
			    "gpugate: checkpoint volume: PersistentVolumeClaim \"%.63s\" "
			    "is not ReadWriteMany; pods on different nodes cannot all "
			    "mount it",
			    pl->claim_name);
}

/*
 * Borrowing makes a workload preemptible (gpugate may take it back), not a
 * user of the checkpoint hooks: they come with a preemptible class, or the
 * user's own gpugate.io/preemptible "true" (the label gpugate stamps on a
 * borrower comes with gpugate.io/borrowed: a borrowing Job's pods and a
 * reinvocation get no hooks from it).
 */
/*
 * Whether the workload takes units beyond its tenant's nominal quota.  A
 * request of nothing (a Job of parallelism 0) by a tenant already over it
 * is in the borrowed position but borrows nothing: it is not made
 * preemptible, and its reinvocation agrees (the gpugate.io/borrowed record
 * is a count of at least one).
 */
static bool borrows(const struct decision *out)
{
	return out->has_quota && out->quota.position == QUOTA_BORROWED &&
	       out->quota.borrowed > 0;
}

static bool wants_hooks(const struct ctx *c)
{
	const char *label = decide_label(c->wl, STAMP_PREEMPTIBLE);

	return c->out->cls->preemptible ||
	       (label && strcmp(label, "true") == 0 &&
		!decide_annotation(c->wl, STAMP_BORROWED));
}

static void plan_checkpoint(struct ctx *c)
{
	const struct policy_checkpoint *ck = policy_checkpoint(c->p);
	const struct workload *wl = c->wl;
	struct plan *pl = &c->out->plan;
	const struct wl_container *gpu = &wl->pod.containers[pl->gpu_container];

	pl->checkpoint = true;
	plan_signal(c);
	pl->grace = ck->grace_period_seconds;
	if (ck->claim_name) {
		plan_claim_name(c, ck->claim_name);
		check_checkpoint_claim(c);
	}
	if (ck->n_pre_stop) {
		if (!gpu->has_pre_stop)
			pl->set_pre_stop = true;
		else if (!pre_stop_is_ours(ck, gpu))
			decide_add_warning(c->out,
				    "gpugate: container \"%.63s\" keeps its own preStop "
				    "hook; make sure it checkpoints within %" PRId64 "s",
				    gpu->name, ck->grace_period_seconds);
	}
	if (wl->kind != WL_JOB || wl->has_disruption_rule)
		return;
	if (!wl->pod.restart_policy || strcmp(wl->pod.restart_policy, "Never") != 0)
		decide_add_warning(c->out,
			    "gpugate: restartPolicy %s lets preemptions count against "
			    "backoffLimit; use restartPolicy Never so that gpugate can "
			    "add a podFailurePolicy",
			    wl->pod.restart_policy ? wl->pod.restart_policy : "(unset)");
	else if (wl->n_failure_rules >= MAX_POD_FAILURE_RULES)
		decide_add_warning(c->out,
			    "gpugate: podFailurePolicy already has %d rules; preemptions "
			    "will count against backoffLimit",
			    MAX_POD_FAILURE_RULES);
	else
		pl->add_failure_rule = true;
}

/* "tenant "product" borrows 8, tenant "x" borrows 2": who holds the lent
 * units of q (QUOTA_MAX_NAMED named, then "and N more"). */
static void borrowers_text(const struct quota_result *q, char *buf, size_t size)
{
	size_t n = q->n_borrowers < QUOTA_MAX_NAMED ? q->n_borrowers : QUOTA_MAX_NAMED;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(buf);

		snprintf(buf + len, size - len, "%stenant \"%.63s\" borrows %" PRId64,
			 i ? ", " : "", q->borrowers[i].tenant, q->borrowers[i].borrowed);
	}
	if (q->n_borrowers > n) {
		size_t len = strlen(buf);

		snprintf(buf + len, size - len, " and %zu more", q->n_borrowers - n);
	}
}

/* What a tenant may hold at most, as a NEVER_FITS message says it:
 * "nominal 8 + borrowing limit 4". */
void decide_ceiling_text(const struct quota_result *q, char *buf, size_t size)
{
	if (!q->cohort)
		snprintf(buf, size, "nominal %" PRId64, q->nominal);
	else if (q->borrowing_limit != POLICY_NO_LIMIT &&
		 q->borrowing_limit <= q->cohort_lendable)
		snprintf(buf, size, "nominal %" PRId64 " + borrowing limit %" PRId64,
			 q->nominal, q->borrowing_limit);
	else
		snprintf(buf, size, "nominal %" PRId64 " + %" PRId64 " that cohort \"%s\" can lend",
			 q->nominal, q->ceiling - q->nominal, q->cohort);
}

/*
 * A pod-template controller (WL_TEMPLATE) reserves nothing: its pods are
 * charged one by one as they are created.  What it asks can still never
 * fit: one pod beyond what the tenant may ever hold, or all its replicas
 * (a CronJob: one Job's parallelism) at once.  Judged against an empty
 * cluster, so a scale within the ceiling is never refused for what others
 * hold now.
 */
void decide_template_ceiling(struct ctx *c)
{
	const struct workload *wl = c->wl;
	const struct decision *out = c->out;
	const char *kind = decide_kind_name(wl);
	bool gang = wl->def->pods == KIND_PODS_JOB; /* a CronJob's: a Job's */
	char ceiling[200], who[96];
	struct quota_result q;
	int64_t per_pod = out->count, pods = wl->replicas;

	snprintf(who, sizeof(who), wl->name && wl->name[0] ? "%s \"%.63s\"" : "%s", kind,
		 wl->name);
	quota_decide(c->p, out->tenant, out->flavor, per_pod, true, &quota_no_usage, &q);
	if (q.position == QUOTA_NO_QUOTA) {
		decide_violate(c, RULES_QUOTA,
			"tenant \"%s\" has no quota for flavor %s (class %s); ask the "
			"platform team for quota",
			out->tenant->name, out->flavor->name, out->cls->name);
		return;
	}
	if (q.position != QUOTA_NEVER_FITS && pods > 1)
		quota_decide(c->p, out->tenant, out->flavor, per_pod * pods, true,
			     &quota_no_usage, &q);
	if (q.position != QUOTA_NEVER_FITS)
		return;
	decide_ceiling_text(&q, ceiling, sizeof(ceiling));
	if (q.requested == per_pod)
		decide_violate(c, RULES_QUOTA,
			"%s can never run a pod: each needs %" PRId64 " %s, tenant "
			"\"%s\" may hold at most %" PRId64 " (%s)",
			who, per_pod, out->flavor->name, out->tenant->name, q.ceiling,
			ceiling);
	else
		decide_violate(c, RULES_QUOTA,
			"%s can never run %s: needs %" PRId64 " %s (%" PRId64 " %s x %"
			PRId64 "), tenant \"%s\" may hold at most %" PRId64 " (%s)",
			who, gang ? "a whole Job" : "all its replicas",
			q.requested, out->flavor->name, pods,
			gang ? "pods" : "replicas", per_pod,
			out->tenant->name, q.ceiling, ceiling);
}

/* The denial of QUOTA_LENT_OUT and QUOTA_RECLAIM_SHORT; `req` says what was
 * requested. */
void decide_lent_out(struct ctx *c, const struct quota_result *q, const char *tenant,
		     const char *flavor, const char *req)
{
	char who[QUOTA_MAX_NAMED * 96 + 32], why[200];

	borrowers_text(q, who, sizeof(who));
	if (q->position == QUOTA_RECLAIM_SHORT && q->any_priority)
		snprintf(why, sizeof(why),
			 "with reclaimWithinCohort Any only preemptible workloads are "
			 "taken back, and they hold %" PRId64
			 "; it waits until the units are returned",
			 q->reclaimable);
	else if (q->position == QUOTA_RECLAIM_SHORT)
		snprintf(why, sizeof(why),
			 "with reclaimWithinCohort LowerPriority only workloads of "
			 "priority below %" PRId32 " are taken back, and they hold %" PRId64
			 "; it waits until the units are returned",
			 q->below, q->reclaimable);
	else
		snprintf(why, sizeof(why), "with reclaimWithinCohort Never it waits "
					   "until they are returned");
	decide_violate(c, RULES_QUOTA,
		"tenant \"%s\" cannot have its lent %s quota back now: requested "
		"%s, in use %" PRId64 " of nominal %" PRId64 ", and %" PRId64 " of "
		"those units are lent out in cohort \"%s\" (%s); %s",
		tenant, flavor, req, q->used, q->nominal, q->reclaim,
		q->cohort ? q->cohort : "", who, why);
}

/* How many pods a WL_TEMPLATE runs, as the decision line says it before
 * "N x flavor": "3 pods x ", "1 pod per node x ", "Jobs of 8 pods x ". */
static const char *template_pods(const struct workload *wl, char *buf, size_t size)
{
	char digits[TEXT_DECIMAL_MAX + 1];
	const char *n = text_int(digits, wl->replicas);

	if (wl->def->pods == KIND_PODS_PER_NODE)
		snprintf(buf, size, "1 pod per node x ");
	else if (wl->def->pods == KIND_PODS_JOB)
		snprintf(buf, size, "Jobs of %s %s x ", n, wl->replicas == 1 ? "pod" : "pods");
	else
		snprintf(buf, size, "%s %s x ", n, wl->replicas == 1 ? "pod" : "pods");
	return buf;
}

/* "24/32 in use" and, when borrowing, the borrowed part. */
void decide_position_text(const struct ctx *c, char *buf, size_t size)
{
	const struct decision *out = c->out;
	const struct quota_result *q = &out->quota;

	if (!out->has_quota) {
		if (c->wl->kind == WL_JOB && !c->wl->job_suspended && out->queue) {
			snprintf(buf, size, "queued in Kueue LocalQueue %.63s: charged when "
				 "Kueue admits it", out->queue);
			return;
		}
		snprintf(buf, size, "%s",
			 c->wl->kind == WL_JOB && c->wl->job_suspended
				 ? "suspended: quota is checked when it is resumed"
			 : c->wl->kind == WL_TEMPLATE
				 ? (c->wl->def->pods == KIND_PODS_JOB
					    ? "each Job is charged when it is created"
					    : "each pod is charged when it is created")
				 : "not charged");
		return;
	}
	switch (q->position) {
	case QUOTA_COVERED:
		/* A Job's pod rides on its gang, a claim on its pod. */
		snprintf(buf, size, "held by %s %.63s",
			 c->wl->kind == WL_CLAIM ? "pod" : "job",
			 q->holder ? q->holder : "");
		return;
	case QUOTA_BORROWED:
		snprintf(buf, size, "%" PRId64 "/%" PRId64 " in use, %" PRId64
			 " borrowed from %.40s",
			 q->used + q->requested, q->nominal, q->borrowed,
			 q->cohort ? q->cohort : "the cohort");
		return;
	default: {
		char used[TEXT_DECIMAL_MAX + 1], nominal[TEXT_DECIMAL_MAX + 1];

		text_cat(buf, size, text_int(used, q->used + q->requested), "/",
			 text_int(nominal, q->nominal), " in use", NULL);
		if (q->position == QUOTA_NOMINAL && q->reclaim > 0) {
			size_t len = strlen(buf);

			snprintf(buf + len, size - len,
				 ", reclaims %" PRId64 " lent in %.40s", q->reclaim,
				 q->cohort ? q->cohort : "the cohort");
		}
		return;
	}
	}
}

static void plan_mapping(struct ctx *c)
{
	const struct workload *wl = c->wl;
	const struct policy_settings *s = policy_settings(c->p);
	const struct policy_class *cls = c->out->cls;
	struct plan *pl = &c->out->plan;
	char pos[160], pods[TEXT_DECIMAL_MAX + 32], count[TEXT_DECIMAL_MAX];

	pl->active = true;
	pl->map = true;
	pl->resource = cls->flavor->resource;
	pl->count = c->out->count;
	if (cls->flavor->dra &&
	    !dra_template_name(cls, pl->count, pl->dra_template, sizeof(pl->dra_template)))
		pl->dra_template[0] = '\0';
	pl->flavor = cls->flavor;
	pl->tenant = c->out->tenant->name;
	pl->cpu = cls->cpu;
	pl->memory = cls->memory;
	if (cls->priority_class_name && !wl->pod.priority_class_name)
		pl->priority_class = cls->priority_class_name;
	if (wl->kind == WL_JOB || wl->owner_job)
		gang_id(wl, pl->gang, sizeof(pl->gang));
	else
		pl->remove_gang = true;
	if (wl->kind == WL_JOB && wl->parallelism > 1 &&
	    cls->topology_mode != POLICY_TOPOLOGY_NONE) {
		pl->topology = cls->topology_mode;
		pl->topology_key = cls->topology_key;
	}
	if (wl->kind == WL_TEMPLATE) {
		pl->class_label = s->class_label;
		pl->class_name = cls->name;
		if (decide_label(wl, s->gpus_label)) {
			pl->gpus_label = s->gpus_label;
			pl->gpus_value = decide_label(wl, s->gpus_label);
		}
	}
	if (wl->kind == WL_JOB && c->out->tenant->local_queue &&
	    !decide_label(wl, KUEUE_QUEUE_LABEL))
		pl->queue_name = c->out->tenant->local_queue;
	if (wl->kind == WL_JOB) {
		pl->replace_when_failed = true;
		pl->class_label = s->class_label;
		pl->class_name = cls->name;
		if (decide_label(wl, s->gpus_label)) {
			pl->gpus_label = s->gpus_label;
			pl->gpus_value = decide_label(wl, s->gpus_label);
		}
	}
	decide_position_text(c, pos, sizeof(pos));
	if (c->out->violation && c->out->mode != POLICY_MODE_ENFORCE)
		snprintf(pl->decision, sizeof(pl->decision), "%s: %s",
			 c->out->mode == POLICY_MODE_AUDIT ? "audit: would deny"
							   : "warn",
			 c->out->message + strlen("gpugate: "));
	else if (wl->kind == WL_JOB)
		text_cat(pl->decision, sizeof(pl->decision), cls->name, ": ",
			 text_int(pods, c->out->claim.pods),
			 c->out->claim.pods == 1 ? " pod x " : " pods x ",
			 text_decimal(count, c->out->count), " x ", cls->flavor->name,
			 cls->flavor->dra ? " (DRA)" : "",
			 " for tenant ", c->out->tenant->name, "; ", pos, NULL);
	else if (wl->kind == WL_TEMPLATE)
		text_cat(pl->decision, sizeof(pl->decision), cls->name, ": ",
			 template_pods(wl, pods, sizeof(pods)),
			 text_decimal(count, c->out->count), " x ", cls->flavor->name,
			 cls->flavor->dra ? " (DRA)" : "",
			 " for tenant ", c->out->tenant->name, "; ", pos, NULL);
	else
		text_cat(pl->decision, sizeof(pl->decision), cls->name, ": ",
			 text_decimal(count, c->out->count), " x ", cls->flavor->name,
			 cls->flavor->dra ? " (DRA)" : "",
			 " for tenant ", c->out->tenant->name, "; ", pos, NULL);

	text_clean(pl->decision);
	decide_gang_plan(c);
	/* A Job's pod carries its Job's decision from the template: the Job
	 * holds the quota, the pod is not judged again. */
	pl->keep_decision =
		wl->kind == WL_POD && wl->owner_job &&
		wl_get(wl->pod.annotations, wl->pod.n_annotations, STAMP_DECISION);

	pl->preemptible = cls->preemptible || borrows(c->out) ||
			  (decide_label(wl, STAMP_PREEMPTIBLE) &&
			   strcmp(decide_label(wl, STAMP_PREEMPTIBLE), "true") == 0);
	if (borrows(c->out))
		pl->borrowed = c->out->quota.borrowed;
	if (wants_hooks(c)) {
		plan_checkpoint(c);
	} else if (pl->preemptible) {
		pl->cap_grace = true;
		pl->grace_cap = policy_checkpoint(c->p)->grace_period_seconds;
	}
}

/*
 * head, then tail, as one line of at most DECIDE_SUCCESS_MAX characters:
 * out->success, and a warning only with settings.admissionWarnings all.
 */
void decide_add_success(struct ctx *c, char *head, const char *tail)
{
	struct decision *out = c->out;

	/* Long names: cut them, keep the numbers, which are what users read. */
	if (strlen(tail) < DECIDE_SUCCESS_MAX - 20)
		text_clip(head, DECIDE_SUCCESS_MAX - strlen(tail));
	snprintf(out->success, sizeof(out->success), "%s%s", head, tail);
	text_clean(out->success);
	if (policy_settings(c->p)->admission_warnings != POLICY_WARNINGS_ALL ||
	    out->n_warnings >= DECIDE_MAX_WARNINGS)
		return;
	decide_add_warning(out, "%s", out->success);
	out->success_warned = true;
}

/* The one short line kubectl prints for an admitted class workload. */
static void success_line(struct ctx *c)
{
	const struct decision *out = c->out;
	char pos[160], head[DECIDE_WARNING_LEN], tail[200];
	char pods[TEXT_DECIMAL_MAX + 32], count[TEXT_DECIMAL_MAX];

	decide_position_text(c, pos, sizeof(pos));
	if (c->wl->kind == WL_JOB)
		text_cat(head, sizeof(head), "gpugate: ", out->cls->name, " -> ",
			 text_int(pods, out->claim.pods),
			 out->claim.pods == 1 ? " pod x " : " pods x ",
			 text_decimal(count, out->count), " x ", out->flavor->name,
			 out->flavor->dra ? " (DRA)" : "",
			 " for tenant ", out->tenant->name, NULL);
	else if (c->wl->kind == WL_TEMPLATE)
		text_cat(head, sizeof(head), "gpugate: ", out->cls->name, " -> ",
			 template_pods(c->wl, pods, sizeof(pods)),
			 text_decimal(count, out->count), " x ", out->flavor->name,
			 out->flavor->dra ? " (DRA)" : "",
			 " for tenant ", out->tenant->name, NULL);
	else
		text_cat(head, sizeof(head), "gpugate: ", out->cls->name, " -> ",
			 text_decimal(count, out->count), " x ", out->flavor->name,
			 out->flavor->dra ? " (DRA)" : "",
			 " for tenant ", out->tenant->name, NULL);
	text_cat(tail, sizeof(tail), " (", pos, ")", NULL);
	decide_add_success(c, head, tail);
}

/*
 * At /validate, what the user of a workload admitted on borrowed quota
 * should know: gpugate made it preemptible, with or without checkpoint
 * hooks (which come only with a preemptible class or the user's own
 * label).  A problem, so a warning whatever settings.admissionWarnings
 * says; once per workload (not for each pod of a Job).  A workload
 * preemptible by its class or the user's label is what was asked for: no
 * problem, nothing said.
 */
static void reclaim_notice(struct ctx *c)
{
	const struct decision *out = c->out;
	bool hooks = wants_hooks(c);
	char n[TEXT_DECIMAL_MAX + 1];

	if ((c->wl->kind == WL_POD && c->wl->owner_job) || !borrows(out))
		return;
	decide_add_warning(c->out,
		    "gpugate: borrowed %s %.40s from cohort %.40s: gpugate takes "
		    "them back when a lender needs them%s",
		    text_int(n, out->quota.borrowed), out->flavor->name,
		    out->quota.cohort ? out->quota.cohort : "",
		    hooks ? ", after a checkpoint" : " (no checkpoint hooks)");
}

/*
 * /validate of a workload that /mutate made preemptible (by its class, or
 * because it borrowed, which gpugate.io/borrowed records): the quota may
 * have moved in between.  Borrowing is safe either way, since the workload
 * can be preempted, so it is admitted; the user learns that the annotation
 * no longer says what it holds.  (Not preemptible and now borrowing is
 * QUOTA_NOT_PREPARED, a denial.)
 */
static void borrow_changed(struct ctx *c)
{
	const struct decision *out = c->out;
	const char *ann = decide_annotation(c->wl, STAMP_BORROWED);
	unsigned said = 0;
	int64_t now;

	if (!out->has_quota || !out->claim.may_borrow ||
	    (out->quota.position != QUOTA_NOMINAL &&
	     out->quota.position != QUOTA_BORROWED))
		return;
	/* Only gpugate writes it (a user's is stripped at /mutate): anything
	 * but a count is some other webhook's business. */
	if (ann && !decide_parse_count(ann, BORROWED_MAX, &said))
		return;
	now = out->quota.position == QUOTA_BORROWED ? out->quota.borrowed : 0;
	if (now == (int64_t)said)
		return;
	if (ann)
		decide_add_warning(c->out,
			    "gpugate: quota changed after mutation: now %" PRId64
			    " borrowed (annotation says %u); it stays preemptible",
			    now, said);
	else
		decide_add_warning(c->out,
			    "gpugate: quota changed after mutation: now %" PRId64
			    " borrowed (no annotation); it stays preemptible",
			    now);
}

/*
 * In warn or audit mode, a violation that leaves nothing to map still
 * leaves its record on the object, and stamps the user set are removed.
 */
static void plan_note(struct ctx *c)
{
	struct plan *pl = &c->out->plan;

	if (workload_has_stamps(c->wl)) {
		pl->active = true;
		pl->strip_stamps = true;
	}
	if (!c->out->violation || c->out->mode == POLICY_MODE_ENFORCE)
		return;
	pl->active = true;
	snprintf(pl->note, sizeof(pl->note), "%s: %s",
		 c->out->mode == POLICY_MODE_AUDIT ? "audit: would deny" : "warn",
		 c->out->message + strlen("gpugate: "));
	text_clean(pl->note);
}

/* A raw request charged to quota is stamped like a class workload. */
static void plan_raw(struct ctx *c)
{
	struct plan *pl = &c->out->plan;
	char pos[160];

	pl->active = true;
	pl->stamp_only = true;
	pl->tenant = c->out->tenant->name;
	pl->flavor = c->out->flavor;
	pl->remove_gang = c->wl->kind == WL_POD && !c->wl->owner_job;
	decide_position_text(c, pos, sizeof(pos));
	snprintf(pl->decision, sizeof(pl->decision),
		 "no class: %" PRId64 " x %s (%s) for tenant %s; %s",
		 c->out->claim.units, c->out->flavor->name, c->out->flavor->units,
		 c->out->tenant->name, pos);
}

void decide_finish(struct ctx *c)
{
	struct decision *out = c->out;

	if (!out->allowed)
		return;
	if (c->in->phase == DECIDE_MUTATE) {
		if (out->cls)
			plan_mapping(c);
		else if (out->claim.needed && out->flavor && out->tenant)
			plan_raw(c);
		else
			plan_note(c);
	} else if (out->cls && (!out->violation || out->mode != POLICY_MODE_AUDIT)) {
		success_line(c);
		reclaim_notice(c);
		borrow_changed(c);
	}
}
