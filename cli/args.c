/* args: the command line's tables, and the one parser that reads them. */
#include "cli/args.h"

#include "base/text.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

static void vreport(const struct args_command *cmd, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (cmd && cmd->report) {
		cmd->report(msg);
		return;
	}
	fprintf(stderr, "gpugate%s%s: %s; run 'gpugate%s%s --help'\n",
		cmd ? " " : "", cmd ? cmd->name : "", msg, cmd ? " " : "",
		cmd ? cmd->name : "");
}

int args_usage_error(const struct args_command *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(cmd, fmt, ap);
	va_end(ap);
	return ARGS_USAGE_ERROR;
}

const char *args_opt_label(const struct args_opt *o, char buf[64])
{
	if (!o)
		snprintf(buf, 64, "?");
	else if (o->letter)
		snprintf(buf, 64, "-%c", o->letter);
	else
		snprintf(buf, 64, "--%s", o->name);
	return buf;
}

void args_init(struct args *a, const struct args_command *cmd)
{
	size_t n = 0, s = 0;

	memset(a, 0, sizeof(*a));
	a->cmd = cmd;
	/* ':' first: a missing value is told apart from an unknown option. */
	a->shorts[s++] = ':';
	for (const struct args_opt *o = cmd->opts; o && o->name && n < ARGS_MAX_OPTS;
	     o++, n++) {
		a->longs[n] = (struct option){o->name,
					      o->value == ARGS_NONE ? no_argument
								    : required_argument,
					      NULL, o->val};
		if (o->letter) {
			a->shorts[s++] = o->letter;
			if (o->value != ARGS_NONE)
				a->shorts[s++] = ':';
		}
	}
	a->shorts[s] = '\0';
	optind = 1;
	opterr = 0;
}

static const struct args_opt *opt_by_val(const struct args_command *cmd, int val)
{
	for (const struct args_opt *o = cmd->opts; o && o->name; o++)
		if (o->val == val)
			return o;
	return NULL;
}

/* "--name" or "--name=value" of an unknown long option: the message. */
static void unknown_long(const struct args *a, const char *arg)
{
	const char *name = arg + 2;
	size_t len = strcspn(name, "=");
	struct text_nearest near = {0};
	char hint[160], given[128], cands[400] = "";
	size_t matches = 0;

	snprintf(given, sizeof(given), "%.*s", (int)(len < 100 ? len : 100), name);
	for (const struct args_opt *o = a->cmd->opts; o && o->name; o++) {
		if (strncmp(o->name, given, len) == 0) {
			size_t used = strlen(cands);

			snprintf(cands + used, sizeof(cands) - used, "%s--%s",
				 matches ? ", " : "", o->name);
			matches++;
		}
		text_nearest_consider(&near, given, o->name);
	}
	if (matches > 1) {
		args_usage_error(a->cmd, "option '--%s' is ambiguous: %s", given, cands);
		return;
	}
	args_usage_error(a->cmd, "unknown option '--%s'%s", given,
			 text_nearest_hint(&near, "--", hint, sizeof(hint)));
}

int args_next(struct args *a, int argc, char **argv)
{
	int c = getopt_long(argc, argv, a->shorts, a->longs, NULL);
	/* After an error getopt has stepped past a long option, not always
	 * past a short one inside a cluster (-qx): arg is only read for
	 * "--". */
	const char *arg = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "";
	bool is_long = strncmp(arg, "--", 2) == 0;

	if (c == ':') {
		if (is_long)
			args_usage_error(a->cmd, "option '%.*s' needs a value",
					 (int)strcspn(arg, "="), arg);
		else
			args_usage_error(a->cmd, "option '-%c' needs a value", optopt);
		return '?';
	}
	if (c != '?')
		return c;
	if (is_long && strchr(arg, '=') && optopt && opt_by_val(a->cmd, optopt))
		/* getopt_long: a flag given a value ("--quiet=1"). */
		args_usage_error(a->cmd, "option '%.*s' takes no value",
				 (int)strcspn(arg, "="), arg);
	else if (optopt)
		args_usage_error(a->cmd, "unknown option '-%c'", optopt);
	else
		unknown_long(a, arg);
	return '?';
}

/* "text, json or yaml" */
static void list_choices(const char *const *choices, char *buf, size_t size)
{
	size_t n = 0, used = 0;

	while (choices[n])
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < size; i++) {
		int w = snprintf(buf + used, size - used, "%s%s",
				 i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/* The index of value in choices, or -1 after the message. */
static int choose(const struct args_command *cmd, const char *what,
		  const char *const *choices, const char *value)
{
	struct text_nearest near = {0};
	char list[300], hint[160];

	for (size_t i = 0; choices[i]; i++) {
		if (strcmp(choices[i], value) == 0)
			return (int)i;
		text_nearest_consider(&near, value, choices[i]);
	}
	list_choices(choices, list, sizeof(list));
	args_usage_error(cmd, "%s wants %s, not '%.60s'%s", what, list, value,
			 text_nearest_hint(&near, "", hint, sizeof(hint)));
	return -1;
}

int args_choice(const struct args *a, int val, const char *value)
{
	const struct args_opt *o = opt_by_val(a->cmd, val);
	char label[64];

	if (!o || !o->choices) {
		args_usage_error(a->cmd, "internal error: option %d has no values", val);
		return -1;
	}
	return choose(a->cmd, args_opt_label(o, label), o->choices, value);
}

int args_operand_choice(const struct args_command *cmd, const char *what,
			const char *value)
{
	return choose(cmd, what, cmd->operand_choices, value);
}
