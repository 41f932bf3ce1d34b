/*
 * RFC 6902 JSON Patch (webhook/patch.c): the strict applier with every
 * message it prints, the diff on Kubernetes-shaped objects, and a seeded
 * random round trip apply(a, diff(a, b)) == b.
 *
 * JSON in the tables is written with ' for " to stay readable; J() turns it
 * back (no case needs a literal ').
 */
#include "base/diag.h"
#include "webhook/patch.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *J(const char *text)
{
	char buf[4096];
	json_error_t err;
	json_t *v;
	size_t n = strlen(text);

	cr_assert_lt(n, sizeof(buf));
	for (size_t i = 0; i <= n; i++)
		buf[i] = text[i] == '\'' ? '"' : text[i];
	v = json_loads(buf, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
	cr_assert_not_null(v, "bad test json %s: %s", buf, err.text);
	return v;
}

static char *dump(const json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* ------------------------------------------------------------------ */
/* apply: the RFC 6902 appendix situations and every strictness rule   */

/*
 * Inline arrays, not pointers: Criterion runs each parameter in a fresh
 * process of a position-independent binary, where the parent's pointers to
 * string literals mean nothing.
 */
struct apply_case {
	char name[64];
	char doc[192];
	char patch[384];
	char want[192]; /* the result, or "" when err is expected */
	char err[192];  /* the one line in the sink */
};

static struct apply_case apply_cases[] = {
	/* RFC 6902 appendix A */
	{"A.1 add an object member", "{'foo':'bar'}",
	 "[{'op':'add','path':'/baz','value':'qux'}]",
	 "{'baz':'qux','foo':'bar'}", ""},
	{"A.2 add an array element", "{'foo':['bar','baz']}",
	 "[{'op':'add','path':'/foo/1','value':'qux'}]",
	 "{'foo':['bar','qux','baz']}", ""},
	{"A.3 remove an object member", "{'baz':'qux','foo':'bar'}",
	 "[{'op':'remove','path':'/baz'}]", "{'foo':'bar'}", ""},
	{"A.4 remove an array element", "{'foo':['bar','qux','baz']}",
	 "[{'op':'remove','path':'/foo/1'}]", "{'foo':['bar','baz']}", ""},
	{"A.5 replace a value", "{'baz':'qux','foo':'bar'}",
	 "[{'op':'replace','path':'/baz','value':'boo'}]",
	 "{'baz':'boo','foo':'bar'}", ""},
	{"A.6 move a value",
	 "{'foo':{'bar':'baz','waldo':'fred'},'qux':{'corge':'grault'}}",
	 "[{'op':'move','from':'/foo/waldo','path':'/qux/thud'}]",
	 "{'foo':{'bar':'baz'},'qux':{'corge':'grault','thud':'fred'}}", ""},
	{"A.7 move an array element", "{'foo':['all','grass','cows','eat']}",
	 "[{'op':'move','from':'/foo/1','path':'/foo/3'}]",
	 "{'foo':['all','cows','eat','grass']}", ""},
	{"A.8 test succeeds", "{'baz':'qux','foo':['a',2,'c']}",
	 "[{'op':'test','path':'/baz','value':'qux'},"
	 "{'op':'test','path':'/foo/1','value':2}]",
	 "{'baz':'qux','foo':['a',2,'c']}", ""},
	{"A.9 test fails", "{'baz':'qux'}",
	 "[{'op':'test','path':'/baz','value':'bar'}]", "",
	 "op 0 (test /baz): test failed: value differs"},
	{"A.10 add a nested member object", "{'foo':'bar'}",
	 "[{'op':'add','path':'/child','value':{'grandchild':{}}}]",
	 "{'foo':'bar','child':{'grandchild':{}}}", ""},
	{"A.11 unrecognised members are ignored", "{'foo':'bar'}",
	 "[{'op':'add','path':'/baz','value':'qux','xyz':123}]",
	 "{'foo':'bar','baz':'qux'}", ""},
	{"A.12 add to a nonexistent target", "{'foo':'bar'}",
	 "[{'op':'add','path':'/baz/bat','value':'qux'}]", "",
	 "op 0 (add /baz/bat): parent /baz does not exist"},
	{"A.14 ~01 is ~1, not /", "{'/':9,'~1':10}",
	 "[{'op':'test','path':'/~01','value':10}]", "{'/':9,'~1':10}", ""},
	{"A.15 a string is not a number", "{'/':9,'~1':10}",
	 "[{'op':'test','path':'/~01','value':'10'}]", "",
	 "op 0 (test /~01): test failed: value differs"},
	{"A.16 add an array value with -", "{'foo':['bar']}",
	 "[{'op':'add','path':'/foo/-','value':['abc','def']}]",
	 "{'foo':['bar',['abc','def']]}", ""},

	/* more that must work */
	{"empty patch", "{'a':1}", "[]", "{'a':1}", ""},
	{"add over an existing member replaces it", "{'a':1,'b':2}",
	 "[{'op':'add','path':'/a','value':{'x':[]}}]",
	 "{'a':{'x':[]},'b':2}", ""},
	{"add at the length appends", "{'a':[1,2]}",
	 "[{'op':'add','path':'/a/2','value':3}]", "{'a':[1,2,3]}", ""},
	{"add at index 0 of an empty array", "{'a':[]}",
	 "[{'op':'add','path':'/a/0','value':0}]", "{'a':[0]}", ""},
	{"add null is a value", "{}", "[{'op':'add','path':'/a','value':null}]",
	 "{'a':null}", ""},
	{"add the whole document", "{'a':1}",
	 "[{'op':'add','path':'','value':[1]}]", "[1]", ""},
	{"replace the whole document", "[1]",
	 "[{'op':'replace','path':'','value':{'b':2}}]", "{'b':2}", ""},
	{"test the whole document", "{'a':[1]}",
	 "[{'op':'test','path':'','value':{'a':[1]}}]", "{'a':[1]}", ""},
	{"the empty key is /", "{'':1}",
	 "[{'op':'replace','path':'/','value':2}]", "{'':2}", ""},
	{"~0 and ~1 unescape", "{'a/b':{'m~n':1}}",
	 "[{'op':'replace','path':'/a~1b/m~0n','value':2}]",
	 "{'a/b':{'m~n':2}}", ""},
	{"label key with a slash", "{'metadata':{'labels':{}}}",
	 "[{'op':'add','path':'/metadata/labels/gpugate.io~1class',"
	 "'value':'a100'}]",
	 "{'metadata':{'labels':{'gpugate.io/class':'a100'}}}", ""},
	{"01 and - are plain object keys", "{'01':1,'-':2}",
	 "[{'op':'remove','path':'/01'},{'op':'replace','path':'/-','value':3}]",
	 "{'-':3}", ""},
	{"nested arrays", "{'a':[[1,2],[3]]}",
	 "[{'op':'remove','path':'/a/0/1'},{'op':'add','path':'/a/1/0',"
	 "'value':0},{'op':'replace','path':'/a/1/1','value':4}]",
	 "{'a':[[1],[0,4]]}", ""},
	{"copy", "{'a':{'b':1}}", "[{'op':'copy','from':'/a','path':'/c'}]",
	 "{'a':{'b':1},'c':{'b':1}}", ""},
	{"copy into its own child", "{'a':{'b':1}}",
	 "[{'op':'copy','from':'/a','path':'/a/c'}]",
	 "{'a':{'b':1,'c':{'b':1}}}", ""},
	{"copy an array element to -", "{'a':[1,2]}",
	 "[{'op':'copy','from':'/a/0','path':'/a/-'}]", "{'a':[1,2,1]}", ""},
	{"move onto itself is a no-op", "{'a':[1,2]}",
	 "[{'op':'move','from':'/a/1','path':'/a/1'}]", "{'a':[1,2]}", ""},
	{"move to -", "{'a':[1,2,3]}",
	 "[{'op':'move','from':'/a/0','path':'/a/-'}]", "{'a':[2,3,1]}", ""},
	{"move to a sibling that shares a prefix", "{'a':1}",
	 "[{'op':'move','from':'/a','path':'/ab'}]", "{'ab':1}", ""},
	{"move to the whole document", "{'a':{'b':1}}",
	 "[{'op':'move','from':'/a','path':''}]", "{'b':1}", ""},
	{"test an integer against the same integer", "{'a':1}",
	 "[{'op':'test','path':'/a','value':1}]", "{'a':1}", ""},

	/* the patch and its operations */
	{"patch is not an array", "{}", "{'op':'add','path':'/a','value':1}",
	 "", "patch is not an array"},
	{"operation is not an object", "{}", "[[]]", "",
	 "op 0: operation is not an object"},
	{"missing op", "{}", "[{'path':'/a'}]", "", "op 0: missing \"op\""},
	{"op is not a string", "{}", "[{'op':1,'path':'/a'}]", "",
	 "op 0: \"op\" is not a string"},
	{"unknown op", "{}", "[{'op':'frob','path':'/a'}]", "",
	 "op 0: unknown op \"frob\""},
	{"op names are case sensitive", "{}",
	 "[{'op':'ADD','path':'/a','value':1}]", "",
	 "op 0: unknown op \"ADD\""},
	{"missing path", "{}", "[{'op':'add','value':1}]", "",
	 "op 0 (add): missing \"path\""},
	{"path is not a string", "{'a':1}", "[{'op':'remove','path':5}]", "",
	 "op 0 (remove): \"path\" is not a string"},
	{"missing value for add", "{}", "[{'op':'add','path':'/a'}]", "",
	 "op 0 (add /a): missing \"value\""},
	{"missing value for replace", "{'a':1}",
	 "[{'op':'replace','path':'/a'}]", "",
	 "op 0 (replace /a): missing \"value\""},
	{"missing value for test", "{'a':1}", "[{'op':'test','path':'/a'}]", "",
	 "op 0 (test /a): missing \"value\""},
	{"missing from for move", "{'a':1}", "[{'op':'move','path':'/b'}]", "",
	 "op 0 (move /b): missing \"from\""},
	{"from is not a string", "{'a':1}",
	 "[{'op':'copy','from':null,'path':'/b'}]", "",
	 "op 0 (copy /b): \"from\" is not a string"},
	{"the failing op is named by index",
	 "{'metadata':{'name':'p'}}",
	 "[{'op':'test','path':'/metadata/name','value':'p'},"
	 "{'op':'add','path':'/spec','value':{}},"
	 "{'op':'add','path':'/metadata/annotations','value':{}},"
	 "{'op':'add','path':'/metadata/labels/x','value':'y'}]",
	 "", "op 3 (add /metadata/labels/x): parent /metadata/labels does not "
	     "exist"},

	/* pointer syntax */
	{"path without a leading slash", "{'a':{'b':1}}",
	 "[{'op':'add','path':'a/b','value':1}]", "",
	 "op 0 (add a/b): path does not start with \"/\""},
	{"bad escape ~2", "{'a~2b':1}", "[{'op':'remove','path':'/a~2b'}]", "",
	 "op 0 (remove /a~2b): bad escape in path: \"~\" must be followed by "
	 "\"0\" or \"1\""},
	{"~ at the end", "{'a~':1}", "[{'op':'remove','path':'/a~'}]", "",
	 "op 0 (remove /a~): bad escape in path: \"~\" must be followed by "
	 "\"0\" or \"1\""},
	{"from without a leading slash", "{'a':1}",
	 "[{'op':'move','from':'a','path':'/b'}]", "",
	 "op 0 (move /b): from does not start with \"/\""},
	{"bad escape in from", "{'a':1}",
	 "[{'op':'copy','from':'/~a','path':'/b'}]", "",
	 "op 0 (copy /b): bad escape in from: \"~\" must be followed by \"0\" "
	 "or \"1\""},
	{"NUL byte in path", "{'a':1}",
	 "[{'op':'remove','path':'/a\\u0000b'}]", "",
	 "op 0 (remove /a?b): path contains a NUL byte"},
	{"control characters are not printed", "{'a':1}",
	 "[{'op':'remove','path':'/x\\n'}]", "",
	 "op 0 (remove /x?): path does not exist"},

	/* array indices */
	{"leading zero", "{'a':[1,2]}", "[{'op':'add','path':'/a/01','value':0}]",
	 "", "op 0 (add /a/01): bad array index \"01\" in path"},
	{"leading zero in the middle", "{'a':[{'b':1}]}",
	 "[{'op':'replace','path':'/a/00/b','value':2}]", "",
	 "op 0 (replace /a/00/b): bad array index \"00\" in path"},
	{"plus sign", "{'a':[1,2]}", "[{'op':'remove','path':'/a/+1'}]", "",
	 "op 0 (remove /a/+1): bad array index \"+1\" in path"},
	{"minus sign", "{'a':[1,2]}", "[{'op':'remove','path':'/a/-1'}]", "",
	 "op 0 (remove /a/-1): bad array index \"-1\" in path"},
	{"not a number", "{'a':[1,2]}",
	 "[{'op':'test','path':'/a/1a','value':2}]", "",
	 "op 0 (test /a/1a): bad array index \"1a\" in path"},
	{"empty index", "{'a':[1,2]}", "[{'op':'remove','path':'/a/'}]", "",
	 "op 0 (remove /a/): bad array index \"\" in path"},
	{"bad index in from", "{'a':[1,2]}",
	 "[{'op':'move','from':'/a/01','path':'/b'}]", "",
	 "op 0 (move /b): bad array index \"01\" in from"},
	{"add past the length", "{'a':[1,2]}",
	 "[{'op':'add','path':'/a/3','value':0}]", "",
	 "op 0 (add /a/3): array index 3 out of range (length 2)"},
	{"remove at the length", "{'a':[1,2]}",
	 "[{'op':'remove','path':'/a/2'}]", "",
	 "op 0 (remove /a/2): array index 2 out of range (length 2)"},
	{"replace at the length", "{'a':[1,2]}",
	 "[{'op':'replace','path':'/a/2','value':0}]", "",
	 "op 0 (replace /a/2): array index 2 out of range (length 2)"},
	{"test at the length", "{'a':[]}",
	 "[{'op':'test','path':'/a/0','value':0}]", "",
	 "op 0 (test /a/0): array index 0 out of range (length 0)"},
	{"index too large for any array", "{'a':[1,2]}",
	 "[{'op':'remove','path':'/a/99999999999999999999999'}]", "",
	 "op 0 (remove /a/99999999999999999999999): array index "
	 "99999999999999999999999 out of range (length 2)"},
	{"- with remove", "{'a':[1,2]}", "[{'op':'remove','path':'/a/-'}]", "",
	 "op 0 (remove /a/-): \"-\" is only valid for add"},
	{"- with replace", "{'a':[1,2]}",
	 "[{'op':'replace','path':'/a/-','value':0}]", "",
	 "op 0 (replace /a/-): \"-\" is only valid for add"},
	{"- with test", "{'a':[1,2]}",
	 "[{'op':'test','path':'/a/-','value':2}]", "",
	 "op 0 (test /a/-): \"-\" is only valid for add"},
	{"- in the middle", "{'a':[{'b':1}]}",
	 "[{'op':'add','path':'/a/-/b','value':2}]", "",
	 "op 0 (add /a/-/b): parent /a/- does not exist"},
	{"- as a from", "{'a':[1]}",
	 "[{'op':'move','from':'/a/-','path':'/b'}]", "",
	 "op 0 (move /b): from /a/- does not exist"},

	/* targets */
	{"parent is a scalar", "{'a':1}",
	 "[{'op':'add','path':'/a/b','value':1}]", "",
	 "op 0 (add /a/b): parent /a is not an object or array"},
	{"grandparent missing", "{}", "[{'op':'add','path':'/a/b/c','value':1}]",
	 "", "op 0 (add /a/b/c): parent /a/b does not exist"},
	{"intermediate index out of range", "{'a':[{'b':1}]}",
	 "[{'op':'replace','path':'/a/1/b','value':2}]", "",
	 "op 0 (replace /a/1/b): parent /a/1 does not exist"},
	{"add to a scalar document", "5", "[{'op':'add','path':'/a','value':1}]",
	 "", "op 0 (add /a): parent \"\" is not an object or array"},
	{"remove a missing member", "{'a':1}", "[{'op':'remove','path':'/b'}]",
	 "", "op 0 (remove /b): path does not exist"},
	{"replace a missing member", "{'a':1}",
	 "[{'op':'replace','path':'/b','value':1}]", "",
	 "op 0 (replace /b): path does not exist"},
	{"test a missing member", "{'a':1}",
	 "[{'op':'test','path':'/b','value':null}]", "",
	 "op 0 (test /b): path does not exist"},
	{"remove the whole document", "{'a':1}",
	 "[{'op':'remove','path':''}]", "",
	 "op 0 (remove \"\"): cannot remove the whole document"},
	{"test compares 1 and 1.0 as json_equal does", "{'a':1}",
	 "[{'op':'test','path':'/a','value':1.0}]", "",
	 "op 0 (test /a): test failed: value differs"},
	{"from does not exist", "{'a':1}",
	 "[{'op':'copy','from':'/b','path':'/c'}]", "",
	 "op 0 (copy /c): from /b does not exist"},
	{"from under a scalar", "{'a':1}",
	 "[{'op':'copy','from':'/a/b','path':'/c'}]", "",
	 "op 0 (copy /c): from /a/b does not exist"},
	{"move into its own child", "{'a':{'b':{}}}",
	 "[{'op':'move','from':'/a','path':'/a/b/c'}]", "",
	 "op 0 (move /a/b/c): cannot move /a into its own child"},
	{"move the whole document into a child", "{'a':1}",
	 "[{'op':'move','from':'','path':'/b'}]", "",
	 "op 0 (move /b): cannot move \"\" into its own child"},
	{"move: the destination index counts after the removal", "{'a':[1,2]}",
	 "[{'op':'move','from':'/a/0','path':'/a/2'}]", "",
	 "op 0 (move /a/2): array index 2 out of range (length 1)"},
};

ParameterizedTestParameters(patch, apply)
{
	return cr_make_param_array(struct apply_case, apply_cases,
				   sizeof(apply_cases) / sizeof(apply_cases[0]));
}

ParameterizedTest(struct apply_case *c, patch, apply)
{
	json_t *doc = J(c->doc), *patch = J(c->patch), *got;
	json_t *before = json_deep_copy(doc);
	struct diag d;

	diag_init(&d);
	got = patch_apply(doc, patch, &d);
	cr_assert(json_equal(doc, before), "case \"%s\": doc modified",
		  c->name);
	if (c->want[0]) {
		json_t *want = J(c->want);
		char *s = got ? dump(got) : NULL;

		cr_assert_not_null(got, "case \"%s\": %s", c->name,
				   diag_text(&d));
		cr_assert(json_equal(got, want), "case \"%s\": got %s", c->name,
			  s);
		cr_assert_eq(diag_count(&d), 0);
		free(s);
		json_decref(want);
	} else {
		char first[sizeof(d.buf)];

		cr_assert_null(got, "case \"%s\": accepted", c->name);
		cr_assert_eq(diag_count(&d), 1, "case \"%s\": %s", c->name,
			     diag_text(&d));
		diag_first(&d, first, sizeof(first));
		cr_assert_str_eq(first, c->err, "case \"%s\"", c->name);
	}
	json_decref(got);
	json_decref(before);
	json_decref(patch);
	json_decref(doc);
}

Test(patch, apply_result_shares_nothing)
{
	json_t *doc = J("{'a':{'b':[1]}}");
	json_t *patch = J("[{'op':'add','path':'/c','value':{'d':[2]}}]");
	json_t *copy = json_deep_copy(patch);
	json_t *got = patch_apply(doc, patch, NULL);

	cr_assert_not_null(got);
	cr_assert_neq(json_object_get(got, "a"), json_object_get(doc, "a"));
	cr_assert_neq(json_object_get(got, "c"),
		      json_object_get(json_array_get(patch, 0), "value"));
	json_array_append_new(json_object_get(json_object_get(got, "c"), "d"),
			      json_integer(3));
	cr_assert(json_equal(patch, copy));
	json_decref(copy);
	json_decref(got);
	json_decref(patch);
	json_decref(doc);
}

Test(patch, apply_cuts_long_paths_in_messages)
{
	char path[400], want[512];
	json_t *doc = J("{}"), *patch;
	struct diag d;

	memset(path, 'x', sizeof(path));
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	patch = json_pack("[{s:s, s:s}]", "op", "remove", "path", path);
	cr_assert_not_null(patch);
	snprintf(want, sizeof(want),
		 "op 0 (remove %.200s...): path does not exist\n", path);
	diag_init(&d);
	cr_assert_null(patch_apply(doc, patch, &d));
	cr_assert_str_eq(diag_text(&d), want);
	json_decref(patch);
	json_decref(doc);
}

/* ------------------------------------------------------------------ */
/* diff                                                                */

struct diff_case {
	char name[64];
	char from[640];
	char to[640];
	char want[640]; /* the exact patch, in order */
};

#define POD_HEAD                                      \
	"{'apiVersion':'v1','kind':'Pod','metadata':" \
	"{'name':'train','namespace':'ml'"
#define CTR "{'name':'main','image':'pytorch:2'"

static struct diff_case diff_cases[] = {
	{"equal documents give an empty patch",
	 POD_HEAD "},'spec':{'containers':[" CTR "}]}}",
	 POD_HEAD "},'spec':{'containers':[" CTR "}]}}", "[]"},
	{"a pod without labels gets the whole labels map",
	 POD_HEAD "},'spec':{}}",
	 POD_HEAD ",'labels':{'gpugate.io/class':'a100','gpugate.io/tenant':'ml'}},"
		  "'spec':{}}",
	 "[{'op':'add','path':'/metadata/labels','value':"
	 "{'gpugate.io/class':'a100','gpugate.io/tenant':'ml'}}]"},
	{"a pod with labels gets one more, escaped",
	 POD_HEAD ",'labels':{'app':'x'}},'spec':{}}",
	 POD_HEAD ",'labels':{'app':'x','gpugate.io/class':'a100'}},'spec':{}}",
	 "[{'op':'add','path':'/metadata/labels/gpugate.io~1class',"
	 "'value':'a100'}]"},
	{"a container without resources gets resources.limits",
	 POD_HEAD "},'spec':{'containers':[" CTR "}]}}",
	 POD_HEAD "},'spec':{'containers':[" CTR
		  ",'resources':{'limits':{'nvidia.com/gpu':'8'}}}]}}",
	 "[{'op':'add','path':'/spec/containers/0/resources','value':"
	 "{'limits':{'nvidia.com/gpu':'8'}}}]"},
	{"a container with empty resources gets limits",
	 POD_HEAD "},'spec':{'containers':[" CTR ",'resources':{}}]}}",
	 POD_HEAD "},'spec':{'containers':[" CTR
		  ",'resources':{'limits':{'nvidia.com/gpu':'8'}}}]}}",
	 "[{'op':'add','path':'/spec/containers/0/resources/limits','value':"
	 "{'nvidia.com/gpu':'8'}}]"},
	{"a gpu limit changes",
	 POD_HEAD "},'spec':{'containers':[" CTR
		  ",'resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}",
	 POD_HEAD "},'spec':{'containers':[" CTR
		  ",'resources':{'limits':{'nvidia.com/gpu':'8'}}}]}}",
	 "[{'op':'replace','path':'/spec/containers/0/resources/limits/"
	 "nvidia.com~1gpu','value':'8'}]"},
	{"env appended to an existing list",
	 POD_HEAD "},'spec':{'containers':[{'name':'a'}," CTR
		  ",'env':[{'name':'A','value':'1'}]}]}}",
	 POD_HEAD "},'spec':{'containers':[{'name':'a'}," CTR
		  ",'env':[{'name':'A','value':'1'},"
		  "{'name':'CKPT','value':'/ckpt'}]}]}}",
	 "[{'op':'add','path':'/spec/containers/1/env/1','value':"
	 "{'name':'CKPT','value':'/ckpt'}}]"},
	{"env created when absent",
	 POD_HEAD "},'spec':{'containers':[" CTR "}]}}",
	 POD_HEAD "},'spec':{'containers':[" CTR
		  ",'env':[{'name':'CKPT','value':'/ckpt'}]}]}}",
	 "[{'op':'add','path':'/spec/containers/0/env','value':"
	 "[{'name':'CKPT','value':'/ckpt'}]}]"},
	{"tolerations appended at explicit increasing indices",
	 POD_HEAD "},'spec':{'tolerations':[{'key':'a','operator':'Exists'}]}}",
	 POD_HEAD "},'spec':{'tolerations':[{'key':'a','operator':'Exists'},"
		  "{'key':'nvidia.com/gpu','operator':'Exists','effect':"
		  "'NoSchedule'},{'key':'gpugate.io/h100','operator':'Exists'}]}}",
	 "[{'op':'add','path':'/spec/tolerations/1','value':{'key':"
	 "'nvidia.com/gpu','operator':'Exists','effect':'NoSchedule'}},"
	 "{'op':'add','path':'/spec/tolerations/2','value':{'key':"
	 "'gpugate.io/h100','operator':'Exists'}}]"},
	{"a key with / and ~",
	 POD_HEAD ",'annotations':{'a~b/c':'1'}}}",
	 POD_HEAD ",'annotations':{'a~b/c':'2','~/':'3'}}}",
	 "[{'op':'replace','path':'/metadata/annotations/a~0b~1c','value':'2'},"
	 "{'op':'add','path':'/metadata/annotations/~0~1','value':'3'}]"},
	{"removals first, then to's key order",
	 "{'a':1,'b':2,'c':3}", "{'d':4,'c':5,'a':1}",
	 "[{'op':'remove','path':'/b'},{'op':'add','path':'/d','value':4},"
	 "{'op':'replace','path':'/c','value':5}]"},
	{"arrays shrink from the end", "{'x':[1,2,3,4,5]}", "{'x':[0,2,3]}",
	 "[{'op':'replace','path':'/x/0','value':0},"
	 "{'op':'remove','path':'/x/4'},{'op':'remove','path':'/x/3'}]"},
	{"nested arrays", "[[1,2],[3]]", "[[1],[3,4],[5]]",
	 "[{'op':'remove','path':'/0/1'},{'op':'add','path':'/1/1','value':4},"
	 "{'op':'add','path':'/2','value':[5]}]"},
	{"a type change is a replace", "{'a':{'b':1},'c':[1],'d':1}",
	 "{'a':[1],'c':{'b':1},'d':'1'}",
	 "[{'op':'replace','path':'/a','value':[1]},"
	 "{'op':'replace','path':'/c','value':{'b':1}},"
	 "{'op':'replace','path':'/d','value':'1'}]"},
	{"1 and 1.0 differ as json_equal says", "{'a':1,'b':0.5}",
	 "{'a':1.0,'b':0.5}", "[{'op':'replace','path':'/a','value':1.0}]"},
	{"scalars at the top are replaced whole", "1", "'x'",
	 "[{'op':'replace','path':'','value':'x'}]"},
	{"an object replaces an array at the top", "[1]", "{'a':1}",
	 "[{'op':'replace','path':'','value':{'a':1}}]"},
	{"the empty key", "{'':{'':1}}", "{'':{'':2}}",
	 "[{'op':'replace','path':'//','value':2}]"},
};

ParameterizedTestParameters(patch, diff)
{
	return cr_make_param_array(struct diff_case, diff_cases,
				   sizeof(diff_cases) / sizeof(diff_cases[0]));
}

/*
 * patch_diff_write() writes the bytes json_dumps(JSON_COMPACT) gives for
 * patch_diff()'s array, and counts its operations.
 */
static void assert_text_matches(const json_t *from, const json_t *to,
				const json_t *built, unsigned i)
{
	struct strbuf sb;
	char *want = json_dumps(built, JSON_COMPACT);
	long n;

	strbuf_init(&sb, (size_t)1 << 20);
	n = patch_diff_write(from, to, &sb);
	cr_assert_eq(n, (long)json_array_size(built), "case %u: %ld operations", i, n);
	cr_assert_str_eq(sb.buf, want, "case %u", i);
	free(want);
	strbuf_release(&sb);
}

ParameterizedTest(struct diff_case *c, patch, diff)
{
	json_t *from = J(c->from), *to = J(c->to), *want = J(c->want);
	json_t *got = patch_diff(from, to), *applied;
	char *s = got ? dump(got) : NULL;
	struct diag d;

	cr_assert_not_null(got);
	cr_assert(json_equal(got, want), "case \"%s\": got %s", c->name, s);
	assert_text_matches(from, to, got, 0);
	diag_init(&d);
	applied = patch_apply(from, got, &d);
	cr_assert_not_null(applied, "case \"%s\": %s", c->name, diag_text(&d));
	cr_assert(json_equal(applied, to), "case \"%s\"", c->name);
	free(s);
	json_decref(applied);
	json_decref(got);
	json_decref(want);
	json_decref(to);
	json_decref(from);
}

Test(patch, diff_shares_nothing_with_its_inputs)
{
	json_t *from = J("{}"), *to = J("{'labels':{'a':'b'}}");
	json_t *p = patch_diff(from, to);

	cr_assert_not_null(p);
	cr_assert_neq(json_object_get(json_array_get(p, 0), "value"),
		      json_object_get(to, "labels"));
	cr_assert_eq(to->refcount, 1);
	json_decref(p);
	json_decref(to);
	json_decref(from);
}

/* ------------------------------------------------------------------ */
/* patch_pointer_append                                                */

Test(patch, pointer_append_escapes)
{
	char p[64] = "/metadata/labels";
	size_t n = strlen(p);

	cr_assert_eq(patch_pointer_append(p, sizeof(p), &n, "gpugate.io/class",
					  NULL),
		     0);
	cr_assert_str_eq(p, "/metadata/labels/gpugate.io~1class");
	cr_assert_eq(n, strlen(p));
	cr_assert_eq(patch_pointer_append(p, sizeof(p), &n, "~", NULL), 0);
	cr_assert_eq(patch_pointer_append(p, sizeof(p), &n, "", NULL), 0);
	cr_assert_str_eq(p, "/metadata/labels/gpugate.io~1class/~0/");
}

Test(patch, pointer_append_refuses_what_does_not_fit)
{
	char p[8] = "/ab";
	size_t n = 3;
	struct diag d;

	diag_init(&d);
	/* "/ab" + "/~1c" + NUL is exactly 8 bytes. */
	cr_assert_eq(patch_pointer_append(p, sizeof(p), &n, "/c", &d), 0);
	cr_assert_str_eq(p, "/ab/~1c");
	cr_assert_eq(patch_pointer_append(p, sizeof(p), &n, "", &d), -1);
	cr_assert_str_eq(p, "/ab/~1c");
	cr_assert_eq(n, 7);
	cr_assert_str_eq(diag_text(&d), "json pointer does not fit in 8 bytes\n");
}

/* ------------------------------------------------------------------ */
/* the random round trip                                              */

static uint64_t rnd(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static unsigned pick(uint64_t *s, unsigned n)
{
	return (unsigned)(rnd(s) % n);
}

static const char *const keys[] = {
	"a", "b", "c", "", "/", "~", "~0", "~1", "a/b", "m~n", "0", "01", "-",
	"gpugate.io/class", "~/~/", "é",
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static json_t *gen(uint64_t *s, int depth)
{
	unsigned k = pick(s, depth >= 6 ? 6 : 9);
	json_t *v;

	switch (k) {
	case 0:
		return json_null();
	case 1:
		return json_boolean(pick(s, 2));
	case 2:
		return json_integer((json_int_t)pick(s, 4) - 1);
	case 3:
		return json_real((double)pick(s, 4) / 2);
	case 4:
	case 5:
		return json_string(keys[pick(s, NKEYS)]);
	case 6:
	case 7:
		v = json_object();
		for (unsigned n = pick(s, 5); n > 0; n--)
			json_object_set_new(v, keys[pick(s, NKEYS)],
					    gen(s, depth + 1));
		return v;
	default:
		v = json_array();
		for (unsigned n = pick(s, 5); n > 0; n--)
			json_array_append_new(v, gen(s, depth + 1));
		return v;
	}
}

/* A value like v: most of it kept, some of it changed. */
static json_t *mutate(uint64_t *s, const json_t *v, int depth)
{
	json_t *out;

	if (pick(s, 8) == 0)
		return gen(s, depth);
	if (json_is_object(v)) {
		const char *key;
		json_t *val;

		out = json_object();
		json_object_foreach((json_t *)v, key, val)
		{
			unsigned r = pick(s, 6);

			if (r == 0)
				continue; /* dropped */
			json_object_set_new(out, key,
					    r == 1 ? mutate(s, val, depth + 1)
						   : json_deep_copy(val));
		}
		for (unsigned n = pick(s, 3); n > 0 && depth < 6; n--)
			json_object_set_new(out, keys[pick(s, NKEYS)],
					    gen(s, depth + 1));
		return out;
	}
	if (json_is_array(v)) {
		size_t n = json_array_size(v);
		size_t keep = pick(s, 3) ? n : pick(s, (unsigned)n + 1);

		out = json_array();
		for (size_t i = 0; i < keep; i++) {
			const json_t *e = json_array_get(v, i);

			json_array_append_new(out, pick(s, 3)
							   ? json_deep_copy(e)
							   : mutate(s, e, depth + 1));
		}
		for (unsigned m = pick(s, 4); m > 0 && depth < 6; m--)
			json_array_append_new(out, gen(s, depth + 1));
		return out;
	}
	return json_deep_copy(v);
}

static void round_trip(const json_t *a, const json_t *b, unsigned i)
{
	json_t *p = patch_diff(a, b), *self = patch_diff(a, a), *got;
	struct diag d;
	char *sa, *sb, *sp;

	cr_assert_not_null(p);
	cr_assert_not_null(self);
	assert_text_matches(a, b, p, i);
	cr_assert_eq(json_array_size(self), 0, "pair %u: diff(a, a) not empty",
		     i);
	for (size_t k = 0; k < json_array_size(p); k++) {
		const char *op = json_string_value(
			json_object_get(json_array_get(p, k), "op"));

		cr_assert(op && (strcmp(op, "add") == 0 ||
				 strcmp(op, "remove") == 0 ||
				 strcmp(op, "replace") == 0));
	}
	diag_init(&d);
	got = patch_apply(a, p, &d);
	if (!got || !json_equal(got, b)) {
		sa = dump(a);
		sb = dump(b);
		sp = dump(p);
		cr_assert_fail("pair %u: %s\nfrom %s\nto   %s\npatch %s", i,
			       diag_text(&d), sa, sb, sp);
	}
	json_decref(got);
	json_decref(self);
	json_decref(p);
}

Test(patch, random_round_trip)
{
	uint64_t seed = 20240611;
	unsigned pairs = 4000;

	for (unsigned i = 0; i < pairs; i++) {
		json_t *a = gen(&seed, 0);
		json_t *b = pick(&seed, 4) ? mutate(&seed, a, 0)
					   : gen(&seed, 0); /* unrelated */

		round_trip(a, b, i);
		round_trip(b, a, i);
		json_decref(b);
		json_decref(a);
	}
}

/* ------------------------------------------------------------------ */
/* out of memory                                                       */

/* jansson's allocations fail once `budget` of them have been made. */
static size_t budget = SIZE_MAX;

static void *counted_malloc(size_t n)
{
	if (budget == 0)
		return NULL;
	budget--;
	return malloc(n);
}

Test(patch, survives_every_jansson_allocation_failure)
{
	json_t *from, *to, *patch;
	unsigned diff_ok = 0, apply_ok = 0;

	json_set_alloc_funcs(counted_malloc, free);
	from = J(POD_HEAD ",'labels':{'a':'b'}},'spec':{'containers':[" CTR
		 ",'env':[{'name':'A'}]}]}}");
	to = J(POD_HEAD ",'labels':{'gpugate.io/class':'a100'}},"
	       "'spec':{'containers':[" CTR ",'env':[{'name':'A'},{'name':'B'}],"
	       "'resources':{'limits':{'nvidia.com/gpu':'8'}}}],"
	       "'tolerations':[{'key':'k'}]}}");
	patch = patch_diff(from, to);
	cr_assert_not_null(patch);
	/* Every n below fails somewhere inside, and the last ones succeed. */
	for (size_t n = 0; n < 400; n++) {
		struct diag d;
		json_t *p, *got;
		char first[256];

		budget = n;
		p = patch_diff(from, to);
		if (p) {
			cr_assert(json_equal(p, patch));
			diff_ok++;
		}
		budget = n;
		diag_init(&d);
		got = patch_apply(from, patch, &d);
		budget = SIZE_MAX;
		if (got) {
			cr_assert(json_equal(got, to));
			apply_ok++;
		} else {
			size_t len;

			diag_first(&d, first, sizeof(first));
			len = strlen(first);
			cr_assert_eq(diag_count(&d), 1);
			cr_assert(len >= 13 && strcmp(first + len - 13,
						      "out of memory") == 0,
				  "budget %zu: %s", n, first);
		}
		json_decref(got);
		json_decref(p);
	}
	cr_assert_gt(diff_ok, 0);
	cr_assert_lt(diff_ok, 400);
	cr_assert_gt(apply_ok, 0);
	cr_assert_lt(apply_ok, 400);
	json_decref(patch);
	json_decref(to);
	json_decref(from);
}

/* ------------------------------------------------------------------ */
/* patch_diff_write                                                    */

Test(patch, text_writer_fails_over_the_cap)
{
	json_t *from = J("{}"), *to = J("{'labels':{'a':'bbbbbbbbbbbbbbbbbbbb'}}");
	struct strbuf sb;

	strbuf_init(&sb, 16);
	cr_assert_eq(patch_diff_write(from, to, &sb), -1);
	cr_assert(strbuf_failed(&sb));
	strbuf_release(&sb);
	json_decref(to);
	json_decref(from);
}

Test(patch, text_writer_writes_an_empty_array_for_no_change)
{
	json_t *a = J("{'a':[1,{'b':null}]}");
	struct strbuf sb;

	strbuf_init(&sb, 1024);
	cr_assert_eq(patch_diff_write(a, a, &sb), 0);
	cr_assert_str_eq(sb.buf, "[]");
	strbuf_release(&sb);
	json_decref(a);
}
