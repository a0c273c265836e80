// The desktop keyring (the freedesktop.org Secret Service over D-Bus)
// through libsecret, loaded when first asked for: no header of libsecret
// or GLib is needed to build, and a process that never asks links neither.
// The functions wrap what Swift cannot call (variadic functions, GError,
// GList) and fail cleanly while libsecret is not loaded.
#ifndef URLLOADING_CSECRET_H
#define URLLOADING_CSECRET_H

/// libsecret's and GLib's objects, opaque here.
typedef struct urlloading_secret_table urlloading_secret_table;
typedef struct urlloading_secret_list urlloading_secret_list;
typedef struct urlloading_cancellable urlloading_cancellable;

/// Loads libsecret once (libsecret-1.so.0 and what it links); 1 when it is
/// there, else 0 with `*message` saying why (a static text, not to be freed).
int urlloading_secret_load(const char **message);

/// Whether a Secret Service answers on the session bus.
int urlloading_secret_service_ping(urlloading_cancellable *cancellable, char **message);
/// Stores an item of the schema; 1 when stored.
int urlloading_secret_store(urlloading_secret_table *attributes, const char *label, const char *password, urlloading_cancellable *cancellable, char **message);
/// The password of the item with these attributes (free with urlloading_secret_free_string), NULL when none or on error.
char *urlloading_secret_lookup(urlloading_secret_table *attributes, urlloading_cancellable *cancellable, char **message);
/// 1 when items were removed, 0 when none matched, -1 on error.
int urlloading_secret_clear(urlloading_secret_table *attributes, urlloading_cancellable *cancellable, char **message);
/// Every item of the schema with these attributes, unlocked ones with their secrets loaded (free with urlloading_secret_items_free).
urlloading_secret_list *urlloading_secret_search(urlloading_secret_table *attributes, urlloading_cancellable *cancellable, char **message);

/// An attribute table whose keys and values it owns (free with urlloading_secret_attributes_free); NULL while libsecret is not loaded.
urlloading_secret_table *urlloading_secret_attributes(void);
void urlloading_secret_attribute_set(urlloading_secret_table *attributes, const char *name, const char *value);
const char *urlloading_secret_attribute_get(urlloading_secret_table *attributes, const char *name);
void urlloading_secret_attributes_free(urlloading_secret_table *attributes);

/// An item's attributes (free with urlloading_secret_attributes_free).
urlloading_secret_table *urlloading_secret_item_attributes(urlloading_secret_list *node);
/// An item's secret as text (free with urlloading_secret_free_string), NULL when it is locked or not text.
char *urlloading_secret_item_password(urlloading_secret_list *node, urlloading_cancellable *cancellable);
void urlloading_secret_items_free(urlloading_secret_list *items);
urlloading_secret_list *urlloading_secret_next(urlloading_secret_list *node);

urlloading_cancellable *urlloading_cancellable_new(void);
void urlloading_cancellable_cancel(urlloading_cancellable *cancellable);
void urlloading_cancellable_free(urlloading_cancellable *cancellable);
/// Overwrites and frees a text the functions above returned.
void urlloading_secret_free_string(char *text);

#endif
