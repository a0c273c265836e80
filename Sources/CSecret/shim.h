// libsecret (the freedesktop.org Secret Service over D-Bus) for the
// credential store's keyring backend: the schema, and typed
// wrappers for what Swift cannot call (variadic functions, GError, GList).
#include <libsecret/secret.h>
#include <string.h>

#define URLLOADING_SECRET_ATTRIBUTES \
    { \
        { "host", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "port", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "protocol", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "realm", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "method", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "proxy", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "user", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "store", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { "default", SECRET_SCHEMA_ATTRIBUTE_STRING }, \
        { NULL, 0 }, \
    }

/// One item per protection space and user, as git's libsecret helper keeps
/// them, plus the store the item belongs to (its data directory) and
/// whether it is the space's default credential.
static inline const SecretSchema *urlloading_secret_schema(void) {
    static const SecretSchema schema = { "org.urlloading.Credential", SECRET_SCHEMA_NONE, URLLOADING_SECRET_ATTRIBUTES };
    return &schema;
}

/// The same attributes without matching the schema's name, for searches: a
/// locked gnome-keyring collection matches hashed attributes but never the
/// name, so only this finds (and counts) its locked items.
static inline const SecretSchema *urlloading_secret_search_schema(void) {
    static const SecretSchema schema = { "org.urlloading.Credential", SECRET_SCHEMA_DONT_MATCH_NAME, URLLOADING_SECRET_ATTRIBUTES };
    return &schema;
}

/// An attribute table whose keys and values it owns.
static inline GHashTable *urlloading_secret_attributes(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

static inline void urlloading_secret_attribute_set(GHashTable *attributes, const char *name, const char *value) {
    g_hash_table_insert(attributes, g_strdup(name), g_strdup(value));
}

static inline const char *urlloading_secret_attribute_get(GHashTable *attributes, const char *name) {
    return (const char *)g_hash_table_lookup(attributes, name);
}

/// The error's message (to be freed with g_free), and the error freed.
static inline char *urlloading_secret_take_error(GError *error) {
    if (!error) return NULL;
    char *message = g_strdup(error->message);
    g_error_free(error);
    return message;
}

/// Whether a Secret Service answers on the session bus.
static inline int urlloading_secret_service_ping(GCancellable *cancellable, char **message) {
    GError *error = NULL;
    SecretService *service = secret_service_get_sync(SECRET_SERVICE_NONE, cancellable, &error);
    if (!service) { *message = urlloading_secret_take_error(error); return 0; }
    g_object_unref(service);
    return 1;
}

static inline int urlloading_secret_store(GHashTable *attributes, const char *label, const char *password, GCancellable *cancellable, char **message) {
    GError *error = NULL;
    gboolean stored = secret_password_storev_sync(urlloading_secret_schema(), attributes, SECRET_COLLECTION_DEFAULT, label, password, cancellable, &error);
    if (!stored) *message = urlloading_secret_take_error(error);
    return stored ? 1 : 0;
}

/// The password of the item with these attributes (free with secret_password_free), NULL when none or on error.
static inline char *urlloading_secret_lookup(GHashTable *attributes, GCancellable *cancellable, char **message) {
    GError *error = NULL;
    char *password = secret_password_lookupv_sync(urlloading_secret_schema(), attributes, cancellable, &error);
    if (error) *message = urlloading_secret_take_error(error);
    return password;
}

/// 1 when items were removed, 0 when none matched, -1 on error.
static inline int urlloading_secret_clear(GHashTable *attributes, GCancellable *cancellable, char **message) {
    GError *error = NULL;
    gboolean removed = secret_password_clearv_sync(urlloading_secret_schema(), attributes, cancellable, &error);
    if (error) { *message = urlloading_secret_take_error(error); return -1; }
    return removed ? 1 : 0;
}

/// Every item of the schema with these attributes, unlocked ones with their secrets loaded (free with g_list_free_full(list, g_object_unref)).
static inline GList *urlloading_secret_search(GHashTable *attributes, GCancellable *cancellable, char **message) {
    GError *error = NULL;
    GList *items = secret_password_searchv_sync(urlloading_secret_search_schema(), attributes, SECRET_SEARCH_ALL | SECRET_SEARCH_LOAD_SECRETS, cancellable, &error);
    if (error) *message = urlloading_secret_take_error(error);
    return items;
}

/// An item's attributes (free with g_hash_table_unref).
static inline GHashTable *urlloading_secret_item_attributes(GList *node) {
    return secret_retrievable_get_attributes(SECRET_RETRIEVABLE(node->data));
}

/// An item's secret as text (free with g_free), NULL when it is locked or not text.
static inline char *urlloading_secret_item_password(GList *node, GCancellable *cancellable) {
    // The search loaded the secrets of unlocked items: no second call for those.
    SecretValue *value = SECRET_IS_ITEM(node->data) ? secret_item_get_secret(SECRET_ITEM(node->data)) : NULL;
    if (!value) value = secret_retrievable_retrieve_secret_sync(SECRET_RETRIEVABLE(node->data), cancellable, NULL);
    if (!value) return NULL;
    const char *text = secret_value_get_text(value);
    char *copy = text ? g_strdup(text) : NULL;
    secret_value_unref(value);
    return copy;
}

static inline void urlloading_secret_items_free(GList *items) { g_list_free_full(items, g_object_unref); }
static inline GList *urlloading_secret_next(GList *node) { return node ? node->next : NULL; }
static inline GCancellable *urlloading_cancellable_new(void) { return g_cancellable_new(); }
static inline void urlloading_cancellable_cancel(GCancellable *cancellable) { g_cancellable_cancel(cancellable); }
static inline void urlloading_cancellable_free(GCancellable *cancellable) { g_object_unref(cancellable); }
static inline void urlloading_secret_free_string(char *text) { if (text) { memset(text, 0, strlen(text)); g_free(text); } }
