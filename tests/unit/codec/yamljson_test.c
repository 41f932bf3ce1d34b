/* YAML or JSON manifest -> jansson value (codec/yamljson.c). */
#include "codec/yamljson.h"

#include "base/diag.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses text that must be valid; the caller frees the value. */
static json_t *parse_ok(const char *text, size_t len)
{
	struct diag d;
	json_t *v = NULL;
	int rc;

	diag_init(&d);
	rc = yamljson_parse("t", text, len, &v, &d);
	cr_assert_eq(rc, 0, "unexpected error: %s", diag_text(&d));
	cr_assert_eq(diag_count(&d), 0);
	cr_assert_not_null(v);
	return v;
}

/* text converts to the JSON text want (json_equal also compares types). */
static void expect_json(const char *text, const char *want)
{
	json_error_t err;
	json_t *v = parse_ok(text, strlen(text));
	json_t *w = json_loads(want, JSON_DECODE_ANY, &err);
	char *got;

	cr_assert_not_null(w, "bad expected JSON: %s", err.text);
	got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	cr_expect(json_equal(v, w), "got %s\nwant %s", got, want);
	free(got);
	json_decref(v);
	json_decref(w);
}

/*
 * text (len bytes) fails with exactly the one line want; *out stays as it
 * was.  Leaks show up under SANITIZER=address.
 */
static void expect_error_n(const char *text, size_t len, const char *want)
{
	struct diag d;
	json_t *sentinel = json_string("untouched");
	json_t *v = sentinel;
	char line[1100];
	int rc;

	diag_init(&d);
	rc = yamljson_parse("t", text, len, &v, &d);
	cr_assert_eq(rc, -1, "no error for input, want %s", want);
	cr_assert_eq(v, sentinel, "*out was changed on failure");
	cr_assert_eq(diag_count(&d), 1, "messages: %s", diag_text(&d));
	snprintf(line, sizeof(line), "%s\n", want);
	cr_expect_str_eq(diag_text(&d), line);
	json_decref(sentinel);
}

static void expect_error(const char *text, const char *want)
{
	expect_error_n(text, strlen(text), want);
}

/* The value at a dotted path of keys and array indexes ("a.0.b"). */
static json_t *at(json_t *v, const char *path)
{
	json_t *cur = v;
	char buf[256], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && cur;
	     tok = strtok_r(NULL, ".", &save)) {
		if (json_is_array(cur))
			cur = json_array_get(cur, strtoul(tok, NULL, 10));
		else
			cur = json_object_get(cur, tok);
	}
	cr_assert_not_null(cur, "no %s", path);
	return cur;
}

/* The value at a dotted path of keys and array indexes. */
/* ---- realistic manifests ---- */

static const char pod_yaml[] =
	"# A training pod as users write it.\n"
	"apiVersion: v1\n"
	"kind: Pod\n"
	"metadata:\n"
	"  name: trainer-0\n"
	"  namespace: team-a\n"
	"  labels:\n"
	"    app: trainer\n"
	"    gpugate.io/class: a100\n"
	"    shard: \"8\"\n"
	"  annotations:\n"
	"    gpugate.io/preemptible: 'true'\n"
	"    note: yes\n"
	"spec:\n"
	"  restartPolicy: Never\n"
	"  priorityClassName: ~\n"
	"  hostIPC: false\n"
	"  terminationGracePeriodSeconds: 30\n"
	"  containers:\n"
	"  - name: main\n"
	"    image: nvcr.io/nvidia/pytorch:24.01-py3\n"
	"    args: [\"--epochs\", \"8\", --lr, 0.001]\n"
	"    tty: true\n"
	"    ports:\n"
	"    - containerPort: 8080\n"
	"      protocol: TCP\n"
	"    resources:\n"
	"      limits:\n"
	"        nvidia.com/gpu: 8\n"
	"        memory: 64Gi\n"
	"        cpu: \"16\"\n"
	"    volumeMounts:\n"
	"    - {name: cfg, mountPath: /etc/cfg, readOnly: true}\n"
	"  volumes:\n"
	"  - name: cfg\n"
	"    configMap:\n"
	"      name: trainer-cfg\n"
	"      defaultMode: 0644\n"
	"  tolerations:\n"
	"  - key: nvidia.com/gpu\n"
	"    operator: Exists\n"
	"    effect: NoSchedule\n";

static const char pod_json[] =
	"{\"apiVersion\": \"v1\", \"kind\": \"Pod\","
	" \"metadata\": {\"name\": \"trainer-0\", \"namespace\": \"team-a\","
	"  \"labels\": {\"app\": \"trainer\", \"gpugate.io/class\": \"a100\","
	"   \"shard\": \"8\"},"
	"  \"annotations\": {\"gpugate.io/preemptible\": \"true\","
	"   \"note\": \"yes\"}},"
	" \"spec\": {\"restartPolicy\": \"Never\", \"priorityClassName\": null,"
	"  \"hostIPC\": false, \"terminationGracePeriodSeconds\": 30,"
	"  \"containers\": [{\"name\": \"main\","
	"   \"image\": \"nvcr.io/nvidia/pytorch:24.01-py3\","
	"   \"args\": [\"--epochs\", \"8\", \"--lr\", 0.001], \"tty\": true,"
	"   \"ports\": [{\"containerPort\": 8080, \"protocol\": \"TCP\"}],"
	"   \"resources\": {\"limits\": {\"nvidia.com/gpu\": 8,"
	"    \"memory\": \"64Gi\", \"cpu\": \"16\"}},"
	"   \"volumeMounts\": [{\"name\": \"cfg\", \"mountPath\": \"/etc/cfg\","
	"    \"readOnly\": true}]}],"
	"  \"volumes\": [{\"name\": \"cfg\", \"configMap\": {\"name\":"
	"   \"trainer-cfg\", \"defaultMode\": 420}}],"
	"  \"tolerations\": [{\"key\": \"nvidia.com/gpu\","
	"   \"operator\": \"Exists\", \"effect\": \"NoSchedule\"}]}}";

Test(yamljson, pod_manifest_converts)
{
	json_t *v;

	expect_json(pod_yaml, pod_json);

	v = parse_ok(pod_yaml, strlen(pod_yaml));
	cr_expect(json_is_string(at(v, "metadata.labels.shard")));
	cr_expect_str_eq(json_string_value(at(v, "metadata.labels.shard")),
			 "8");
	cr_expect(json_is_integer(at(v, "spec.containers.0.ports.0."
					 "containerPort")));
	/* The key holds dots: looked up directly. */
	cr_expect(json_is_integer(
		json_object_get(at(v, "spec.containers.0.resources.limits"),
				"nvidia.com/gpu")));
	cr_expect(json_is_true(at(v, "spec.containers.0.tty")));
	cr_expect(json_is_false(at(v, "spec.hostIPC")));
	cr_expect(json_is_null(at(v, "spec.priorityClassName")));
	cr_expect(json_is_real(at(v, "spec.containers.0.args.3")));
	/* yes is a string (YAML 1.2), and 0644 is octal as kubectl sends. */
	cr_expect_str_eq(json_string_value(at(v, "metadata.annotations.note")),
			 "yes");
	cr_expect_eq(json_integer_value(
			     at(v, "spec.volumes.0.configMap.defaultMode")),
		     0644);
	json_decref(v);
}

Test(yamljson, json_input_takes_the_same_path)
{
	json_t *a = parse_ok(pod_yaml, strlen(pod_yaml));
	json_t *b = parse_ok(pod_json, strlen(pod_json));

	char *compact, *indented;

	cr_expect(json_equal(a, b));
	/* What jansson (or kubectl -o json) writes reads back the same. */
	compact = json_dumps(a, JSON_COMPACT);
	indented = json_dumps(a, JSON_INDENT(4));
	cr_assert(compact && indented);
	json_decref(b);
	b = parse_ok(compact, strlen(compact));
	cr_expect(json_equal(a, b), "compact: %s", compact);
	json_decref(b);
	b = parse_ok(indented, strlen(indented));
	cr_expect(json_equal(a, b), "indented: %s", indented);
	free(compact);
	free(indented);
	json_decref(a);
	json_decref(b);

	/* Pretty-printed JSON with tabs, escapes and exponents. */
	expect_json("{\n\t\"a\": [1E5, -0.5, 0, -7, 1.5e-3],\n"
		    "\t\"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u263a\",\n"
		    "\t\"e\": {}, \"l\": [], \"n\": null, \"t\": true\n}\n",
		    "{\"a\": [1E5, -0.5, 0, -7, 1.5e-3],"
		    " \"s\": \"q\\\"\\\\/\\b\\f\\n\\r\\t\\u00e9\\u263a\","
		    " \"e\": {}, \"l\": [], \"n\": null, \"t\": true}");
	expect_json("[1, \"2\", [3]]", "[1, \"2\", [3]]");
	expect_json("\"just a string\"", "\"just a string\"");
}

static const char job_yaml[] =
	"apiVersion: batch/v1\n"
	"kind: Job\n"
	"metadata:\n"
	"  name: sweep\n"
	"  labels: {team: vision, gpugate.io/class: t4}\n"
	"spec:\n"
	"  completions: 16\n"
	"  parallelism: 4\n"
	"  backoffLimit: 3\n"
	"  activeDeadlineSeconds: 0x0E10\n"
	"  suspend: False\n"
	"  template:\n"
	"    metadata:\n"
	"      annotations:\n"
	"        description: >\n"
	"          nightly hyper-parameter\n"
	"          sweep\n"
	"    spec:\n"
	"      restartPolicy: OnFailure\n"
	"      containers:\n"
	"      - name: worker\n"
	"        image: registry.local/sweep:1.2\n"
	"        command:\n"
	"        - /bin/sh\n"
	"        - -c\n"
	"        - |\n"
	"          set -e\n"
	"          python sweep.py --trial \"$JOB_COMPLETION_INDEX\"\n"
	"        env:\n"
	"        - name: LR\n"
	"          value: \"0.01\"\n"
	"        - name: VERBOSE\n"
	"          value: 'on'\n"
	"        resources:\n"
	"          limits: {nvidia.com/gpu: 1}\n"
	"---\n";

Test(yamljson, job_manifest_converts)
{
	json_t *v;

	expect_json(
		job_yaml,
		"{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\","
		" \"metadata\": {\"name\": \"sweep\", \"labels\": {\"team\":"
		"  \"vision\", \"gpugate.io/class\": \"t4\"}},"
		" \"spec\": {\"completions\": 16, \"parallelism\": 4,"
		"  \"backoffLimit\": 3, \"activeDeadlineSeconds\": 3600,"
		"  \"suspend\": false,"
		"  \"template\": {\"metadata\": {\"annotations\":"
		"   {\"description\": \"nightly hyper-parameter sweep\\n\"}},"
		"   \"spec\": {\"restartPolicy\": \"OnFailure\","
		"    \"containers\": [{\"name\": \"worker\","
		"     \"image\": \"registry.local/sweep:1.2\","
		"     \"command\": [\"/bin/sh\", \"-c\","
		"      \"set -e\\npython sweep.py --trial"
		" \\\"$JOB_COMPLETION_INDEX\\\"\\n\"],"
		"     \"env\": [{\"name\": \"LR\", \"value\": \"0.01\"},"
		"      {\"name\": \"VERBOSE\", \"value\": \"on\"}],"
		"     \"resources\": {\"limits\": {\"nvidia.com/gpu\": 1}}"
		"    }]}}}}");

	v = parse_ok(job_yaml, strlen(job_yaml));
	cr_expect(json_is_string(at(v, "spec.template.spec.containers.0.env."
					"0.value")));
	cr_expect(json_is_integer(at(v, "spec.completions")));
	json_decref(v);
}

/* ---- scalars ---- */

struct scalar_case {
	char in[64];   /* written as the value of key v */
	char want[64]; /* JSON */
};

ParameterizedTestParameters(yamljson, scalar_types)
{
	static struct scalar_case cases[] = {
		/* null */
		{"~", "null"},
		{"null", "null"},
		{"Null", "null"},
		{"NULL", "null"},
		{"", "null"},
		{"nULL", "\"nULL\""},
		/* booleans, YAML 1.2 only */
		{"true", "true"},
		{"True", "true"},
		{"TRUE", "true"},
		{"false", "false"},
		{"False", "false"},
		{"FALSE", "false"},
		{"yes", "\"yes\""},
		{"No", "\"No\""},
		{"on", "\"on\""},
		{"OFF", "\"OFF\""},
		{"y", "\"y\""},
		{"tRUE", "\"tRUE\""},
		/* integers */
		{"0", "0"},
		{"-0", "0"},
		{"8", "8"},
		{"+3", "3"},
		{"-12", "-12"},
		{"9223372036854775807", "9223372036854775807"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"0x1F", "31"},
		{"0xff", "255"},
		{"0x7FFFFFFFFFFFFFFF", "9223372036854775807"},
		{"0o17", "15"},
		{"0644", "420"},
		{"-0755", "-493"},
		{"00", "0"},
		{"0128", "128"},
		{"09", "9"},
		{"0X1F", "\"0X1F\""},
		{"0x", "\"0x\""},
		{"0o", "\"0o\""},
		{"0o8", "\"0o8\""},
		{"-0x1", "\"-0x1\""},
		{"1_000", "\"1_000\""},
		{"12:30", "\"12:30\""},
		/* floats */
		{"1.5", "1.5"},
		{"-2e3", "-2000.0"},
		{"1e3", "1000.0"},
		{"2E-2", "0.02"},
		{".5", "0.5"},
		{"-.5", "-0.5"},
		{"1.", "1.0"},
		{"+1.25", "1.25"},
		{"1e-999", "0.0"},
		{"1e", "\"1e\""},
		{".", "\".\""},
		{"-.nan", "\"-.nan\""},
		{".infinity", "\".infinity\""},
		/* strings */
		{"\"8\"", "\"8\""},
		{"'true'", "\"true\""},
		{"\"~\"", "\"~\""},
		{"''", "\"\""},
		{"2024-01-01", "\"2024-01-01\""},
		{"64Gi", "\"64Gi\""},
		{"a b  c", "\"a b  c\""},
		{"\"\\u00e9\\t\\x41\"", "\"\\u00e9\\tA\""},
		{"'it''s'", "\"it's\""},
		{"\xc3\xa9t\xc3\xa9", "\"\\u00e9t\\u00e9\""},
		/* explicit tags */
		{"!!str 12", "\"12\""},
		{"!!str", "\"\""},
		{"!!str true", "\"true\""},
		{"! 12", "\"12\""},
		{"!!int \"7\"", "7"},
		{"!!int 0x10", "16"},
		{"!!float 1", "1.0"},
		{"!!float \"2.5\"", "2.5"},
		{"!!bool True", "true"},
		{"!!bool 'false'", "false"},
		{"!!null ''", "null"},
		{"!!null ~", "null"},
		{"!<tag:yaml.org,2002:int> 5", "5"},
	};

	return cr_make_param_array(struct scalar_case, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct scalar_case *c, yamljson, scalar_types)
{
	char text[128], want[128];

	snprintf(text, sizeof(text), "v: %s\n", c->in);
	snprintf(want, sizeof(want), "{\"v\": %s}", c->want);
	expect_json(text, want);
}

Test(yamljson, block_scalars)
{
	expect_json("a: |\n  one\n  two\n\n"
		    "b: |-\n  one\n  two\n"
		    "c: |+\n  keep\n\n"
		    "d: >\n  folded\n  line\n\n  para\n"
		    "e: >-\n  x\n  y\n"
		    "f: |2\n    indented\n"
		    "g: |\n  8080\n"
		    "h: >\n  true\n",
		    "{\"a\": \"one\\ntwo\\n\", \"b\": \"one\\ntwo\","
		    " \"c\": \"keep\\n\\n\", \"d\": \"folded line\\npara\\n\","
		    " \"e\": \"x y\", \"f\": \"  indented\\n\","
		    " \"g\": \"8080\\n\", \"h\": \"true\\n\"}");
}

Test(yamljson, flow_style)
{
	expect_json("{a: [1, two, \"3\", {b: ~}], c: {}, d: [], e: [a: 1]}",
		    "{\"a\": [1, \"two\", \"3\", {\"b\": null}], \"c\": {},"
		    " \"d\": [], \"e\": [{\"a\": 1}]}");
	expect_json("x: [\n  1,\n  2,\n]\n", "{\"x\": [1, 2]}");
	expect_json("- a\n- b: c\n  d: e\n- - x\n  - y\n",
		    "[\"a\", {\"b\": \"c\", \"d\": \"e\"}, [\"x\", \"y\"]]");
}

Test(yamljson, keys_are_text)
{
	expect_json("8080: a\n~: b\ntrue: c\n1.5: d\n0x10: e\n\"q\": f\n"
		    "!!str 7: g\n'': h\n",
		    "{\"8080\": \"a\", \"~\": \"b\", \"true\": \"c\", \"1.5\":"
		    " \"d\", \"0x10\": \"e\", \"q\": \"f\", \"7\": \"g\","
		    " \"\": \"h\"}");
	/* Keys are not resolved: .inf is fine as a key. */
	expect_json(".inf: x\n", "{\".inf\": \"x\"}");
	/* Key order is kept. */
	expect_json("z: 1\na: 2\nm: 3\n", "{\"z\": 1, \"a\": 2, \"m\": 3}");
}

Test(yamljson, documents)
{
	expect_json("---\na: 1\n...\n", "{\"a\": 1}");
	expect_json("a: 1\n---\n", "{\"a\": 1}");
	expect_json("---\n---\na: 1\n---\n...\n", "{\"a\": 1}");
	expect_json("%YAML 1.1\n---\na: 1\n", "{\"a\": 1}");
	expect_json("\xef\xbb\xbf"
		    "a: 1\n",
		    "{\"a\": 1}"); /* UTF-8 byte-order mark */
	expect_json("42\n", "42");
	expect_json("--- ~\n", "null");
	expect_json("a: 1\r\nb: 2\r\n", "{\"a\": 1, \"b\": 2}");
}

Test(yamljson, unicode_rules_follow_libyaml)
{
	/* Raw in a quoted string, NEL folds to a space... */
	expect_json("{\"a\": \"x\xc2\x85y\"}", "{\"a\": \"x y\"}");
	/* ...LS and PS stay but lose the spaces around them (the fuzzer's
	 * round trip found this)... */
	expect_json("{\"a\": \"x\xe2\x80\xa8y\"}",
		    "{\"a\": \"x\\u2028y\"}");
	expect_json("[\"x \xe2\x80\xa9 y\"]", "[\"x\\u2029y\"]");
	/* ...raw DEL, C1 controls and non-characters are refused... */
	expect_error("{\"a\": \"x\x7fy\"}",
		     "t:1: control characters are not allowed (U+007F)");
	expect_error("[\"\xc2\x80\"]",
		     "t:1: control characters are not allowed (U+0080)");
	expect_error("[\"\xef\xbf\xbe\"]",
		     "t:1: control characters are not allowed (U+FFFE)");
	/* ...and escapes keep the text as written (the fuzzer found that
	 * jansson writes these raw, so its own output does not read back). */
	expect_json("{\"a\": \"x\\u0085y\"}", "{\"a\": \"x\\u0085y\"}");
	expect_json("[\"x \\u2029 y\"]", "[\"x \\u2029 y\"]");
	expect_json("[\"\\x80\", \"\\u007f\\uffff\"]",
		    "[\"\\u0080\", \"\\u007f\\uffff\"]");
	/* NEL ends a line, in messages too. */
	expect_error("a: 1\xc2\x85"
		     "a: 2\n",
		     "t:2: duplicate key \"a\" (first at line 1)");
	expect_error("a: 1\xe2\x80\xa9"
		     "b: \xff\n",
		     "t:2: invalid UTF-8 (byte 0xFF)");
}

/* ---- anchors, aliases, merge keys ---- */

Test(yamljson, aliases_are_independent_copies)
{
	const char *text = "base: &b {image: busybox, env: &e [{name: A}]}\n"
			   "one: *b\n"
			   "two: {env: *e}\n"
			   "n: &n 5\n"
			   "m: *n\n"
			   "s: &s \"5\"\n"
			   "t: *s\n";
	json_t *v;

	expect_json(text,
		    "{\"base\": {\"image\": \"busybox\", \"env\": [{\"name\":"
		    " \"A\"}]}, \"one\": {\"image\": \"busybox\", \"env\":"
		    " [{\"name\": \"A\"}]}, \"two\": {\"env\": [{\"name\":"
		    " \"A\"}]}, \"n\": 5, \"m\": 5, \"s\": \"5\", \"t\": "
		    "\"5\"}");
	v = parse_ok(text, strlen(text));
	cr_expect_neq(at(v, "base"), at(v, "one"));
	cr_expect_neq(at(v, "base.env"), at(v, "one.env"));
	cr_expect_neq(at(v, "one.env.0"), at(v, "two.env.0"));
	/* The caller may change one copy without touching the others. */
	json_object_set_new(at(v, "one.env.0"), "name", json_string("B"));
	cr_expect_str_eq(json_string_value(at(v, "base.env.0.name")), "A");
	cr_expect_str_eq(json_string_value(at(v, "two.env.0.name")), "A");
	json_decref(v);
}

Test(yamljson, anchors_redefined_and_used_as_keys)
{
	/* An alias refers to the latest node with that anchor. */
	expect_json("a: &x 1\nb: *x\nc: &x 2\nd: *x\n",
		    "{\"a\": 1, \"b\": 1, \"c\": 2, \"d\": 2}");
	expect_json("a: &x [1, &x 2, *x]\nb: *x\n",
		    "{\"a\": [1, 2, 2], \"b\": 2}");
	/* A scalar anchor used as a key gives its text. */
	expect_json("a: &k 8080\nm: {*k : port}\n",
		    "{\"a\": 8080, \"m\": {\"8080\": \"port\"}}");
	expect_json("{&k name: x, v: *k}",
		    "{\"name\": \"x\", \"v\": \"name\"}");
}

Test(yamljson, merge_keys)
{
	/* Explicit keys win wherever they are written. */
	expect_json("base: &b {image: busybox, cpu: 1, mem: 2Gi}\n"
		    "a:\n  cpu: 2\n  <<: *b\n  mem: 4Gi\n",
		    "{\"base\": {\"image\": \"busybox\", \"cpu\": 1, \"mem\":"
		    " \"2Gi\"}, \"a\": {\"cpu\": 2, \"image\": \"busybox\","
		    " \"mem\": \"4Gi\"}}");
	/* In a sequence the earlier mapping wins. */
	expect_json("x: &x {k: 1, a: x}\ny: &y {k: 2, b: y}\n"
		    "z:\n  <<: [*x, *y]\n",
		    "{\"x\": {\"k\": 1, \"a\": \"x\"}, \"y\": {\"k\": 2, \"b\":"
		    " \"y\"}, \"z\": {\"k\": 1, \"a\": \"x\", \"b\": \"y\"}}");
	/* Inline and empty merges; "<<" quoted is a plain key. */
	expect_json("a: {<<: {p: 1}, q: 2}\nb: {<<: []}\nc: {\"<<\": 3}\n",
		    "{\"a\": {\"p\": 1, \"q\": 2}, \"b\": {}, \"c\": {\"<<\":"
		    " 3}}");
	/* The anchored mapping is not changed by a merge from it. */
	expect_json("a: &a {p: 1}\nb: {<<: *a, p: 2}\nc: *a\n",
		    "{\"a\": {\"p\": 1}, \"b\": {\"p\": 2}, \"c\": {\"p\": "
		    "1}}");
}

/* ---- errors ---- */

struct error_case {
	char in[128];
	size_t len; /* 0: strlen(in) */
	char want[160];
};

ParameterizedTestParameters(yamljson, errors)
{
	static struct error_case cases[] = {
		/* syntax, as libyaml says it, located */
		{"a: 1\n b: 2\n", 0,
		 "t:2: mapping values are not allowed in this context"},
		{"a: [1, 2\n", 0,
		 "t:1: did not find expected ',' or ']' (while parsing a flow "
		 "sequence)"},
		{"a:\n  b: [1,\n  2\n", 0,
		 "t:3: did not find expected ',' or ']' (while parsing a flow "
		 "sequence at line 2)"},
		{"a:\n\tb: 1\n", 0,
		 "t:2: found character that cannot start any token (while "
		 "scanning for the next token)"},
		{"a: \"abc\n", 0,
		 "t:1: found unexpected end of stream (while scanning a quoted "
		 "scalar)"},
		{"{\"a\": 1,, \"b\": 2}", 0,
		 "t:1: did not find expected node content (while parsing a "
		 "flow node)"},
		/* surrogate pairs: libyaml 0.2.5 rejects them (documented) */
		{"{\"a\": \"\\ud83d\\ude00\"}", 0,
		 "t:1: found invalid Unicode character escape code (while "
		 "parsing a quoted scalar)"},
		/* duplicate keys */
		{"a: 1\nb:\n  c: 1\n  c: 2\n", 0,
		 "t:4: duplicate key \"c\" (first at line 3)"},
		{"{\"a\": 1, \"a\": 2}", 0,
		 "t:1: duplicate key \"a\" (first at line 1)"},
		{"a: 1\r\nb: 2\r\na: 3\r\n", 0,
		 "t:3: duplicate key \"a\" (first at line 1)"},
		{"8080: a\n\"8080\": b\n", 0,
		 "t:2: duplicate key \"8080\" (first at line 1)"},
		{"k: &k x\nm:\n  x: 1\n  *k : 2\n", 0,
		 "t:4: duplicate key \"x\" (first at line 3)"},
		{"\"a\\\"b\\n\": 1\n\"a\\\"b\\n\": 2\n", 0,
		 "t:2: duplicate key \"a\\\"b\\x0a\" (first at line 1)"},
		{"\"\\e[1m\\u009b\\\\\": 1\n\"\\e[1m\\u009b\\\\\": 2\n", 0,
		 "t:2: duplicate key \"\\x1b[1m\\u009b\\\\\" "
		 "(first at line 1)"},
		{"<<: {a: 1}\n<<: {b: 1}\n", 0,
		 "t:2: duplicate key \"<<\" (first at line 1)"},
		/* keys that are not scalars */
		{"? {a: 1}\n: x\n", 0,
		 "t:1: mapping key must be a scalar, not a mapping"},
		{"a:\n  ? [a, b]\n  : x\n", 0,
		 "t:2: mapping key must be a scalar, not a sequence"},
		{"{[a]: x}", 0,
		 "t:1: mapping key must be a scalar, not a sequence"},
		{"a: &m {x: 1}\n*m : y\n", 0,
		 "t:2: mapping key must be a scalar, not an alias of a "
		 "mapping"},
		{"a: &s [1]\nb: {*s : y}\n", 0,
		 "t:2: mapping key must be a scalar, not an alias of a "
		 "sequence"},
		/* tags */
		{"a: !foo x\n", 0, "t:1: unknown tag !foo"},
		{"a: 1\nb: !!binary aGk=\n", 0, "t:2: unknown tag !!binary"},
		{"a: !<tag:example.com,2024:x> y\n", 0,
		 "t:1: unknown tag tag:example.com,2024:x"},
		{"!!set {a}\n", 0, "t:1: unknown tag !!set"},
		{"a: !Pod\n  b: 1\n", 0, "t:1: unknown tag !Pod"},
		{"!foo k: v\n", 0, "t:1: unknown tag !foo"},
		{"a: !!str [1]\n", 0,
		 "t:1: tag !!str does not apply to a sequence"},
		{"!!seq {a: 1}\n", 0,
		 "t:1: tag !!seq does not apply to a mapping"},
		{"a: !!map x\n", 0,
		 "t:1: tag !!map does not apply to a scalar"},
		{"a: !!int x\n", 0, "t:1: \"x\" is not a valid !!int"},
		{"a: !!int 1.5\n", 0, "t:1: \"1.5\" is not a valid !!int"},
		{"a: !!bool yes\n", 0, "t:1: \"yes\" is not a valid !!bool"},
		{"a: !!null 0\n", 0, "t:1: \"0\" is not a valid !!null"},
		{"a: !!float 0x1\n", 0, "t:1: \"0x1\" is not a valid !!float"},
		{"!!int k: v\n", 0, "t:1: \"k\" is not a valid !!int"},
		/* numbers JSON cannot hold */
		{"a: 9223372036854775808\n", 0,
		 "t:1: integer 9223372036854775808 is out of range (int64)"},
		{"a: -9223372036854775809\n", 0,
		 "t:1: integer -9223372036854775809 is out of range (int64)"},
		{"a: 0x10000000000000000\n", 0,
		 "t:1: integer 0x10000000000000000 is out of range (int64)"},
		{"a: !!int '99999999999999999999'\n", 0,
		 "t:1: integer 99999999999999999999 is out of range (int64)"},
		{"a: 1e999\n", 0, "t:1: float 1e999 is out of range"},
		{"a: 1\nb: .inf\n", 0,
		 "t:2: float .inf cannot be represented in JSON (no infinity "
		 "or NaN)"},
		{"a: -.Inf\n", 0,
		 "t:1: float -.Inf cannot be represented in JSON (no infinity "
		 "or NaN)"},
		{"a: [.NaN]\n", 0,
		 "t:1: float .NaN cannot be represented in JSON (no infinity "
		 "or NaN)"},
		{"a: !!float .nan\n", 0,
		 "t:1: float .nan cannot be represented in JSON (no infinity "
		 "or NaN)"},
		/* aliases */
		{"a: *x\n", 0, "t:1: undefined alias *x"},
		{"*x : 1\n", 0, "t:1: undefined alias *x"},
		{"a: &a\n  b: *a\n", 0,
		 "t:2: alias *a refers to a node that contains it"},
		{"a: &a [1, [*a]]\n", 0,
		 "t:1: alias *a refers to a node that contains it"},
		{"a:\n  <<: 1\n", 0,
		 "t:2: merge key << needs a mapping or a sequence of mappings"},
		{"a: {<<: [{p: 1}, 2]}\n", 0,
		 "t:1: merge key << needs a mapping or a sequence of mappings"},
		/* documents */
		{"a: 1\n---\nb: 2\n", 0,
		 "t:2: more than one document (explain reads one object)"},
		{"---\n---\na: 1\n---\nb: 2\n", 0,
		 "t:4: more than one document (explain reads one object)"},
		{"{\"a\": 1}\n---\n{\"b\": 2}\n", 0,
		 "t:2: more than one document (explain reads one object)"},
		{"a: 1\n--- ~\n", 0,
		 "t:2: more than one document (explain reads one object)"},
		{"", 0, "t: no document"},
		{"# only a comment\n\n", 0, "t: no document"},
		{"---\n...\n---\n", 0, "t: no document"},
		/* bytes */
		{"a: b\n\0c: d\n", 11, "t:2: NUL byte in input"},
		{"\0", 1, "t:1: NUL byte in input"},
		{"a: \"x\\0y\"\n", 0, "t:1: string contains a NUL character"},
		{"k:\n  \"\\x00\": 1\n", 0,
		 "t:2: string contains a NUL character"},
		{"a: 1\nb: \xe9t\xe9\n", 0, "t:2: invalid UTF-8 (byte 0xE9)"},
		{"a: \xff\n", 0, "t:1: invalid UTF-8 (byte 0xFF)"},
		{"\xff\xfe"
		 "a\0:\0",
		 6, "t:1: invalid UTF-8 (byte 0xFF)"}, /* UTF-16 */
		{"a: \xc0\xaf\n", 0, "t:1: invalid UTF-8 (byte 0xC0)"},
		{"a: \xed\xa0\x80\n", 0, "t:1: invalid UTF-8 (byte 0xED)"},
		{"a: \xf4\x90\x80\x80\n", 0, "t:1: invalid UTF-8 (byte 0xF4)"},
		{"a\rb: \xe2\x82", 0, "t:2: invalid UTF-8 (byte 0xE2)"},
		{"a: \x01\n", 0,
		 "t:1: control characters are not allowed (U+0001)"},
		{"a: 1\nb: \xc2\x9f\n", 0,
		 "t:2: control characters are not allowed (U+009F)"},
	};

	return cr_make_param_array(struct error_case, cases,
				   sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct error_case *c, yamljson, errors)
{
	expect_error_n(c->in, c->len ? c->len : strlen(c->in), c->want);
}

Test(yamljson, long_text_in_messages_is_cut_and_escaped)
{
	char text[512], key[101];

	memset(key, 'k', 100);
	key[100] = '\0';
	snprintf(text, sizeof(text), "%s: 1\n%s: 2\n", key, key);
	expect_error(text, "t:2: duplicate key "
			   "\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
			   "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...\" (first at "
			   "line 1)");
	/* A cut never splits a UTF-8 character. */
	snprintf(text, sizeof(text), "a: !!int %.63s\xc3\xa9xyz\n", key);
	expect_error(text, "t:1: \"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
			   "kkkkkkkkkkkkkkkkkkkk\xc3\xa9...\" is not a valid "
			   "!!int");
}

Test(yamljson, name_and_sink_defaults)
{
	struct diag d;
	json_t *v = NULL;

	diag_init(&d);
	cr_expect_eq(yamljson_parse(NULL, NULL, 0, &v, &d), -1);
	cr_expect_str_eq(diag_text(&d), "<input>: no document\n");
	cr_expect_null(v);
	/* A NULL sink discards the message; the result is the same. */
	cr_expect_eq(yamljson_parse("t", "a: *x", 5, &v, NULL), -1);
	cr_expect_null(v);
	/* The text need not be NUL-terminated. */
	cr_assert_eq(yamljson_parse("t", "a: 12345", 5, &v, &d), 0);
	cr_expect_eq(json_integer_value(json_object_get(v, "a")), 12);
	json_decref(v);
}

/* ---- limits ---- */

static char *repeat(const char *head, const char *s, size_t n,
		    const char *tail)
{
	size_t hl = strlen(head), sl = strlen(s), tl = strlen(tail), i;
	char *buf = malloc(hl + sl * n + tl + 1), *p;

	cr_assert_not_null(buf);
	memcpy(buf, head, hl);
	p = buf + hl;
	for (i = 0; i < n; i++, p += sl)
		memcpy(p, s, sl);
	memcpy(p, tail, tl + 1);
	return buf;
}

/* A mapping holding n nested flow sequences. */
static char *nested(size_t n)
{
	char *open = repeat("a: ", "[", n, ""), *all;

	all = repeat(open, "]", n, "\n");
	free(open);
	return all;
}

Test(yamljson, depth_is_capped)
{
	char *text;
	json_t *v;

	text = nested(YAMLJSON_MAX_DEPTH - 1); /* 256 with the mapping */
	v = parse_ok(text, strlen(text));
	json_decref(v);
	free(text);

	text = nested(YAMLJSON_MAX_DEPTH);
	expect_error(text, "t:1: nesting deeper than 256 levels");
	free(text);

	/* Very deep input stops at the cap, without recursion. */
	text = nested(100000);
	expect_error(text, "t:1: nesting deeper than 256 levels");
	free(text);

	/* Block mappings: the 257th level starts on line 257. */
	{
		char *lines = malloc(300 * 300), *p = lines;
		int i;

		cr_assert_not_null(lines);
		for (i = 0; i < 300; i++)
			p += sprintf(p, "%*sk:\n", i, "");
		expect_error(lines, "t:257: nesting deeper than 256 levels");
		free(lines);
	}
}

Test(yamljson, depth_counts_what_an_alias_copies)
{
	char *deep = nested(YAMLJSON_MAX_DEPTH - 1), *text;
	size_t n = strlen(deep) + 32;

	/* a: 256 levels with the mapping; b: *a as deep, b: [*a] deeper. */
	text = malloc(n);
	cr_assert_not_null(text);
	snprintf(text, n, "a: &a %s", deep + 3);
	text[strlen(text) - 1] = '\0';
	strcat(text, "\nb: *a\n");
	json_decref(parse_ok(text, strlen(text)));
	text[strlen(text) - 3] = '\0';
	strcat(text, "[*a]\n");
	expect_error(text, "t:2: nesting deeper than 256 levels");
	free(text);
	free(deep);
}

/* The billion laughs: each line holds ten aliases of the line before. */
static const char bomb[] = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
			   "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
			   "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
			   "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
			   "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
			   "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
			   "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
			   "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
			   "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";

Test(yamljson, alias_bomb_is_capped, .timeout = 30)
{
	json_t *v;

	expect_error(bomb, "t:6: document expands to more than 1000000 nodes");

	/* Five lines expand to 123456 values: allowed. */
	v = parse_ok(bomb, (size_t)(strchr(strstr(bomb, "e: "), '\n') - bomb));
	cr_expect_eq(json_array_size(at(v, "e.9.9.9")), 10);
	json_decref(v);
}

/* [&a [1 x (k-1)], *a x (lists-1)] plus a last list of m ones. */
static char *exact(size_t lists, size_t k, size_t m)
{
	char *ones = repeat("[", "1,", k - 1, "1]"), *aliases, *last, *text;
	size_t n;

	aliases = repeat("", ", *a", lists - 1, "");
	last = repeat(", [", "1,", m - 1, "1]]");
	n = strlen(ones) + strlen(aliases) + strlen(last) + 8;
	text = malloc(n);
	cr_assert_not_null(text);
	snprintf(text, n, "[&a %s%s%s", ones, aliases, last);
	free(ones);
	free(aliases);
	free(last);
	return text;
}

Test(yamljson, node_cap_is_exact, .timeout = 30)
{
	char *text;
	json_t *v;

	/* 1 + 999 * (1 + 999) + (1 + 998) = 1000000 values. */
	text = exact(999, 999, 998);
	v = parse_ok(text, strlen(text));
	cr_expect_eq(json_array_size(v), 1000);
	json_decref(v);
	free(text);

	text = exact(999, 999, 999);
	expect_error(text, "t:1: document expands to more than 1000000 nodes");
	free(text);
}

/* [&a "x..." (1 KiB), *a x aliases]: (1 + aliases) KiB of text. */
static char *text_bomb(size_t aliases)
{
	char *str = repeat("[&a \"", "x", 1024, "\""), *text;

	text = repeat(str, ", *a", aliases, "]\n");
	free(str);
	return text;
}

Test(yamljson, text_size_is_capped, .timeout = 30)
{
	char *text, *key, *head;
	json_t *v;

	/* Exactly 16 MiB of text is allowed. */
	text = text_bomb(16383);
	v = parse_ok(text, strlen(text));
	cr_expect_eq(json_array_size(v), 16384);
	cr_expect_eq(json_string_length(json_array_get(v, 16383)), 1024);
	json_decref(v);
	free(text);

	text = text_bomb(16384);
	expect_error(text,
		     "t:1: document expands to more than 16777216 bytes of "
		     "text");
	free(text);

	/* Keys count too: a 1 KiB key copied through an alias. */
	key = repeat("k: &k {", "k", 1024, ": 1}\nl: [");
	head = repeat(key, "*k, ", 17000, "*k]\n");
	expect_error(head,
		     "t:2: document expands to more than 16777216 bytes of "
		     "text");
	free(key);
	free(head);
}

/* Inputs the fuzzer (tests/fuzz/yamljson_fuzz.c) reported, kept. */
Test(yamljson, fuzz_regressions, .timeout = 30)
{
	const char *text;
	json_t *v;

	/*
	 * User text that reads like an internal failure is quoted, so the
	 * driver (and callers) can tell it from a real "out of memory".
	 */
	expect_error("a: &a [1,2]\nb: [*a,*a,*a]\nc: [[[[[[1]]]]]]\n"
		     "? complex\n: !!int xout of memory\n",
		     "t:5: \"xout of memory\" is not a valid !!int");
	/*
	 * A mutated alias bomb stops at the node cap (~900000 values built)
	 * before libyaml reaches its syntax error; under ASan with a 600 MB
	 * limit its quarantine made this look like an out-of-memory.
	 */
	expect_error("a: &a [\"x\",\"x\",\"x\",\"x\",\".*a,x\",\"x\",\"x\","
		     "\"x\",\"x\",\"x!bpreVb\",\"x\"]\n"
		     "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		     "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
		     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
		     "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
		     "f: &f [*e,*e,*e,*e,*e,*e,*e,*e}*e,*e]\n"
		     "g [*f,*f,*f,*f,*f,*f,*f,n*f,*f,*f]\n",
		     "t:6: document expands to more than 1000000 nodes");
	/*
	 * Just under the cap (921,236 values): valid, and quick to build; the
	 * fuzzer's 5 s timeout came from its own round trip under ASan.
	 */
	text = "a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\","
	       "\"x\",\"x\"]\n"
	       "b: &b [*a,*a,*a,*a,*a,*a,*a,05*a,*a,*a]\n"
	       "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
	       "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
	       "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
	       "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,tr 65f]\n";
	v = parse_ok(text, strlen(text));
	cr_expect_eq(json_array_size(at(v, "f")), 9);
	cr_expect_str_eq(json_string_value(at(v, "f.0.0.0.0.7")), "05*a");
	cr_expect_str_eq(json_string_value(at(v, "f.8")), "tr 65f");
	json_decref(v);
}

/* ---- yamljson_parse_all: a stream of documents ------------------------- */

Test(yamljson_all, every_document_in_order_with_its_line)
{
	static const char text[] = "# a kustomize build\n"
				   "---\n"
				   "a: 1\n"
				   "---\n"
				   "---\n"
				   "- x\n"
				   "--- {b: 2}\n"
				   "---\n";
	struct yamljson_doc *docs = NULL;
	struct diag d;
	size_t n = 0;

	diag_init(&d);
	cr_assert_eq(yamljson_parse_all("t", text, sizeof(text) - 1, &docs, &n, &d),
		     0, "%s", diag_text(&d));
	cr_assert_eq(n, 3);
	cr_expect_eq(json_integer_value(json_object_get(docs[0].value, "a")), 1);
	cr_expect_eq(docs[0].line, 3);
	cr_expect(json_is_array(docs[1].value));
	cr_expect_eq(docs[1].line, 6);
	cr_expect_eq(json_integer_value(json_object_get(docs[2].value, "b")), 2);
	cr_expect_eq(docs[2].line, 7);
	yamljson_docs_free(docs, n);
}

Test(yamljson_all, anchors_end_with_their_document)
{
	static const char text[] = "a: &x 1\n---\nb: *x\n";
	struct yamljson_doc *docs = NULL;
	struct diag d;
	size_t n = 0;

	diag_init(&d);
	cr_assert_eq(yamljson_parse_all("t", text, sizeof(text) - 1, &docs, &n, &d), -1);
	cr_expect_str_eq(diag_text(&d), "t:3: undefined alias *x\n");
	cr_expect_null(docs);
}

Test(yamljson_all, errors_name_the_line_and_free_what_was_read)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{"a: 1\n---\nb: [\n", "t:3: did not find expected node content (while parsing a flow node)\n"},
		{"", "t: no document\n"},
		{"---\n---\n", "t: no document\n"},
		{"a: 1\n---\nb: \xff\n", "t:3: invalid UTF-8 (byte 0xFF)\n"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct yamljson_doc *docs = NULL;
		struct diag d;
		size_t n = 7;

		diag_init(&d);
		cr_expect_eq(yamljson_parse_all("t", cases[i].text,
						strlen(cases[i].text), &docs, &n, &d),
			     -1, "case %zu", i);
		cr_expect_str_eq(diag_text(&d), cases[i].want, "case %zu", i);
		cr_expect_null(docs);
		cr_expect_eq(n, 7);
	}
}
