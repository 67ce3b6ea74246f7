/* The bridge's table name (sqlname.h). */
#include "sqlname.h"

#include <stdlib.h>
#include <string.h>

static int ident_byte(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int pgb_table_ok(const char *name) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > PGB_TABLE_MAX || (name[0] >= '0' && name[0] <= '9')) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
            return 0;
    return 1;
}

char *pgb_sql(const char *tmpl, const char *table) {
    static const char word[] = PGB_TABLE_DEFAULT;
    size_t wl = sizeof word - 1, tl = strlen(table), count = 0;
    for (const char *p = strstr(tmpl, word); p; p = strstr(p + wl, word)) count++;
    char *out = malloc(strlen(tmpl) + count * (tl + 2) + 1);
    if (out == NULL) return NULL;
    char *o = out;
    int quoted = 0; /* inside a '...' literal */
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, word, wl) == 0 && (p == tmpl || !ident_byte(p[-1]))) {
            size_t sl = 0; /* the identifier's suffix ("_queued", ...) */
            while (ident_byte(p[wl + sl])) sl++;
            if (!quoted) *o++ = '"';
            memcpy(o, table, tl);
            o += tl;
            memcpy(o, p + wl, sl);
            o += sl;
            if (!quoted) *o++ = '"';
            p += wl + sl;
            continue;
        }
        if (*p == '\'') quoted = !quoted;
        *o++ = *p++;
    }
    *o = '\0';
    return out;
}
