/* Error codes: rjq_strerror(), rjq_err_name(), the version, and Redis error texts as codes. */
#include <string.h>

#include "rjq.h"
#include "validate.h"

const char *rjq_strerror(int code) {
    switch (code) {
    case RJQ_OK:
        return "success";
#define RJQ_XX_(name, num, msg) \
    case RJQ_##name:            \
        return msg;
        RJQ_ERRNO_MAP(RJQ_XX_)
#undef RJQ_XX_
    }
    return "unknown error";
}

const char *rjq_err_name(int code) {
    switch (code) {
    case RJQ_OK:
        return "RJQ_OK";
#define RJQ_XX_(name, num, msg) \
    case RJQ_##name:            \
        return "RJQ_" #name;
        RJQ_ERRNO_MAP(RJQ_XX_)
#undef RJQ_XX_
    }
    return NULL;
}

int rjq_version(void) {
    return RJQ_VERSION_MAJOR * 10000 + RJQ_VERSION_MINOR * 100 + RJQ_VERSION_PATCH;
}

int rjq__redis_error_code(const char *err) {
    static const struct {
        const char *needle;
        int code;
    } map[] = {
        {"WRONGTYPE", RJQ_EWRONGTYPE}, {"OOM command not allowed", RJQ_EOOM},
        {"NOAUTH", RJQ_EAUTH},         {"WRONGPASS", RJQ_EAUTH},
        {"NOPERM", RJQ_EAUTH},         {"invalid password", RJQ_EAUTH},
        {"unauthenticated", RJQ_EAUTH}, /* Redis 7: "Protocol error: unauthenticated ..." */
        /* a command, key or channel of a script that the ACL refuses ("ERR
         * The user executing the script can't run this command or
         * subcommand", "... can't access at least one of the keys ...") */
        {"The user executing the script can't", RJQ_EAUTH},
        {"RJQFULL", RJQ_EFULL},         /* enqueue.lua: a bounded queue is full */
    };
    if (err == NULL) return RJQ_EREDIS;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strstr(err, map[i].needle)) return map[i].code;
    return RJQ_EREDIS;
}
/* Errors a server gives while it cannot serve for a moment, before it
 * runs the command: loading its data after a restart, running a long
 * script, being a replica during a failover, a cluster resharding. */
int rjq__redis_error_transient(const char *err) {
    static const char *const prefixes[] = {"LOADING ", "BUSY ",     "READONLY ",
                                           "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN "};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(err, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    return 0;
}

