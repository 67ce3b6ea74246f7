#include "rjq.h"

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

int rjq_version(void) {
    return RJQ_VERSION_MAJOR * 10000 + RJQ_VERSION_MINOR * 100 + RJQ_VERSION_PATCH;
}
