// libsecret and GLib, reached through dlopen: the few types and constants
// used here are declared as libsecret 0.20 and GLib 2 define them (their
// ABI is stable), so building needs neither's headers.
#include "CSecret.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int gboolean;
typedef unsigned long GType;

typedef struct {
    unsigned int domain;
    int code;
    char *message;
} GError;

struct urlloading_secret_list {
    void *data;
    struct urlloading_secret_list *next;
    struct urlloading_secret_list *prev;
};

enum { SCHEMA_NONE = 0, SCHEMA_DONT_MATCH_NAME = 1 << 1 };
enum { SEARCH_ALL = 1 << 1, SEARCH_LOAD_SECRETS = 1 << 3 };
enum { ATTRIBUTE_STRING = 0 };

typedef struct {
    const char *name;
    int type;
} SchemaAttribute;

typedef struct {
    const char *name;
    int flags;
    SchemaAttribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} Schema;

/// One item per protection space and user, as git's libsecret helper keeps
/// them, plus the store the item belongs to (its data directory) and
/// whether it is the space's default credential. The search schema does not
/// match the name: a locked gnome-keyring collection matches hashed
/// attributes but never the name, so only it finds (and counts) locked items.
#define ATTRIBUTES                                                                                                      \
    {                                                                                                                   \
        {"host", ATTRIBUTE_STRING}, {"port", ATTRIBUTE_STRING}, {"protocol", ATTRIBUTE_STRING},                         \
        {"realm", ATTRIBUTE_STRING}, {"method", ATTRIBUTE_STRING}, {"proxy", ATTRIBUTE_STRING},                         \
        {"user", ATTRIBUTE_STRING}, {"store", ATTRIBUTE_STRING}, {"default", ATTRIBUTE_STRING}, {NULL, 0},              \
    }
static const Schema schema = {"org.urlloading.Credential", SCHEMA_NONE, ATTRIBUTES, 0, 0, 0, 0, 0, 0, 0, 0};
static const Schema search_schema = {"org.urlloading.Credential", SCHEMA_DONT_MATCH_NAME, ATTRIBUTES, 0, 0, 0, 0, 0, 0, 0, 0};

typedef struct urlloading_secret_table Table;
typedef struct urlloading_secret_list List;
typedef struct urlloading_cancellable Cancellable;

static struct {
    void *(*service_get_sync)(int, Cancellable *, GError **);
    gboolean (*storev_sync)(const Schema *, Table *, const char *, const char *, const char *, Cancellable *, GError **);
    char *(*lookupv_sync)(const Schema *, Table *, Cancellable *, GError **);
    gboolean (*clearv_sync)(const Schema *, Table *, Cancellable *, GError **);
    List *(*searchv_sync)(const Schema *, Table *, int, Cancellable *, GError **);
    Table *(*retrievable_get_attributes)(void *);
    void *(*item_get_secret)(void *);
    void *(*retrievable_retrieve_secret_sync)(void *, Cancellable *, GError **);
    const char *(*value_get_text)(void *);
    void (*value_unref)(void *);
    GType (*item_get_type)(void);
    Table *(*hash_table_new_full)(void *, void *, void (*)(void *), void (*)(void *));
    void *str_hash;
    void *str_equal;
    void (*release)(void *);
    gboolean (*hash_table_insert)(Table *, void *, void *);
    void *(*hash_table_lookup)(Table *, const void *);
    void (*hash_table_unref)(Table *);
    char *(*duplicate)(const char *);
    void (*error_free)(GError *);
    void (*object_unref)(void *);
    void (*list_free_full)(List *, void (*)(void *));
    Cancellable *(*cancellable_new)(void);
    void (*cancellable_cancel)(Cancellable *);
    gboolean (*type_check_instance_is_a)(void *, GType);
} api;

static int loaded;
static char load_error[300];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int bind_symbol(void *handle, void **slot, const char *name) {
    *slot = dlsym(handle, name);
    if (*slot) return 1;
    snprintf(load_error, sizeof load_error, "libsecret-1.so.0 has no %s (libsecret 0.20 or later is needed)", name);
    return 0;
}

#define BIND(field, name) bind_symbol(handle, (void **)&api.field, name)

static void load(void) {
    // Never closed: GLib's threads and types stay for the process's life.
    // URLLOADING_LIBSECRET names another build of it (a path or a soname).
    const char *name = getenv("URLLOADING_LIBSECRET");
    if (!name || !*name) name = "libsecret-1.so.0";
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *reason = dlerror();
        snprintf(load_error, sizeof load_error, "libsecret cannot be loaded (Debian's libsecret-1-0 installs it): %s", reason ? reason : "dlopen failed");
        return;
    }
    // GLib's functions come through the same handle: dlsym searches what libsecret links.
    loaded = BIND(service_get_sync, "secret_service_get_sync") && BIND(storev_sync, "secret_password_storev_sync")
        && BIND(lookupv_sync, "secret_password_lookupv_sync") && BIND(clearv_sync, "secret_password_clearv_sync")
        && BIND(searchv_sync, "secret_password_searchv_sync") && BIND(retrievable_get_attributes, "secret_retrievable_get_attributes")
        && BIND(item_get_secret, "secret_item_get_secret") && BIND(retrievable_retrieve_secret_sync, "secret_retrievable_retrieve_secret_sync")
        && BIND(value_get_text, "secret_value_get_text") && BIND(value_unref, "secret_value_unref") && BIND(item_get_type, "secret_item_get_type")
        && BIND(hash_table_new_full, "g_hash_table_new_full") && BIND(str_hash, "g_str_hash") && BIND(str_equal, "g_str_equal")
        && BIND(release, "g_free") && BIND(hash_table_insert, "g_hash_table_insert") && BIND(hash_table_lookup, "g_hash_table_lookup")
        && BIND(hash_table_unref, "g_hash_table_unref") && BIND(duplicate, "g_strdup") && BIND(error_free, "g_error_free")
        && BIND(object_unref, "g_object_unref") && BIND(list_free_full, "g_list_free_full") && BIND(cancellable_new, "g_cancellable_new")
        && BIND(cancellable_cancel, "g_cancellable_cancel") && BIND(type_check_instance_is_a, "g_type_check_instance_is_a");
}

int urlloading_secret_load(const char **message) {
    pthread_once(&once, load);
    if (!loaded && message) *message = load_error;
    return loaded;
}

static int ready(void) { return urlloading_secret_load(NULL); }

/// The error's message (to be freed with urlloading_secret_free_string), and the error freed.
static char *take_error(GError *error) {
    if (!error) return NULL;
    char *message = api.duplicate(error->message ? error->message : "an error without a message");
    api.error_free(error);
    return message;
}

int urlloading_secret_service_ping(Cancellable *cancellable, char **message) {
    if (!ready()) return 0;
    GError *error = NULL;
    void *service = api.service_get_sync(0, cancellable, &error);
    if (!service) {
        *message = take_error(error);
        return 0;
    }
    api.object_unref(service);
    return 1;
}

int urlloading_secret_store(Table *attributes, const char *label, const char *password, Cancellable *cancellable, char **message) {
    if (!ready() || !attributes) return 0;
    GError *error = NULL;
    gboolean stored = api.storev_sync(&schema, attributes, "default", label, password, cancellable, &error);
    if (!stored) *message = take_error(error);
    return stored ? 1 : 0;
}

char *urlloading_secret_lookup(Table *attributes, Cancellable *cancellable, char **message) {
    if (!ready() || !attributes) return NULL;
    GError *error = NULL;
    char *password = api.lookupv_sync(&schema, attributes, cancellable, &error);
    if (error) *message = take_error(error);
    return password;
}

int urlloading_secret_clear(Table *attributes, Cancellable *cancellable, char **message) {
    if (!ready() || !attributes) return -1;
    GError *error = NULL;
    gboolean removed = api.clearv_sync(&schema, attributes, cancellable, &error);
    if (error) {
        *message = take_error(error);
        return -1;
    }
    return removed ? 1 : 0;
}

List *urlloading_secret_search(Table *attributes, Cancellable *cancellable, char **message) {
    if (!ready() || !attributes) return NULL;
    GError *error = NULL;
    List *items = api.searchv_sync(&search_schema, attributes, SEARCH_ALL | SEARCH_LOAD_SECRETS, cancellable, &error);
    if (error) *message = take_error(error);
    return items;
}

Table *urlloading_secret_attributes(void) {
    if (!ready()) return NULL;
    return api.hash_table_new_full(api.str_hash, api.str_equal, api.release, api.release);
}

void urlloading_secret_attribute_set(Table *attributes, const char *name, const char *value) {
    if (attributes) api.hash_table_insert(attributes, api.duplicate(name), api.duplicate(value));
}

const char *urlloading_secret_attribute_get(Table *attributes, const char *name) {
    return attributes ? (const char *)api.hash_table_lookup(attributes, name) : NULL;
}

void urlloading_secret_attributes_free(Table *attributes) {
    if (attributes) api.hash_table_unref(attributes);
}

Table *urlloading_secret_item_attributes(List *node) {
    return node ? api.retrievable_get_attributes(node->data) : NULL;
}

char *urlloading_secret_item_password(List *node, Cancellable *cancellable) {
    if (!node) return NULL;
    // The search loaded the secrets of unlocked items: no second call for those.
    void *value = api.type_check_instance_is_a(node->data, api.item_get_type()) ? api.item_get_secret(node->data) : NULL;
    if (!value) value = api.retrievable_retrieve_secret_sync(node->data, cancellable, NULL);
    if (!value) return NULL;
    const char *text = api.value_get_text(value);
    char *copy = text ? api.duplicate(text) : NULL;
    api.value_unref(value);
    return copy;
}

void urlloading_secret_items_free(List *items) {
    if (items) api.list_free_full(items, api.object_unref);
}

List *urlloading_secret_next(List *node) { return node ? node->next : NULL; }

Cancellable *urlloading_cancellable_new(void) { return ready() ? api.cancellable_new() : NULL; }

void urlloading_cancellable_cancel(Cancellable *cancellable) {
    if (cancellable) api.cancellable_cancel(cancellable);
}

void urlloading_cancellable_free(Cancellable *cancellable) {
    if (cancellable) api.object_unref(cancellable);
}

void urlloading_secret_free_string(char *text) {
    if (!text) return;
    memset(text, 0, strlen(text));
    api.release(text);
}
