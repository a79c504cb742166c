/* Licensed under the Apache License, Version 2.0.
 *
 * fuzz_json.c: the JSON encoder, round trip.  A body that decodes to a
 * lesson is encoded as the API sends it; what it writes must parse back
 * (jansson) to the very same lesson, field for field, and a list of it
 * must parse to an array holding it.
 */
#include "fuzz.h"

#include "apr_tables.h"
#include "base/lessons_json.h"
#include "api/lessons_payload.h"

static void fuzz_setup(apr_pool_t *p)
{
    (void)p;
}

static void same_string(json_t *o, const char *name, const char *want)
{
    json_t *v = json_object_get(o, name);

    if (!json_is_string(v) || json_string_length(v) != strlen(want)
        || memcmp(json_string_value(v), want, strlen(want)) != 0) {
        abort();
    }
}

static void same_lesson(json_t *o, const lessons_lesson_t *l)
{
    if (!json_is_object(o)
        || json_integer_value(json_object_get(o, "id")) != l->id
        || json_integer_value(json_object_get(o, "levelId")) != l->level_id
        || json_integer_value(json_object_get(o, "order")) != l->order
        || !json_is_boolean(json_object_get(o, "isActive"))
        || json_is_true(json_object_get(o, "isActive")) != !!l->is_active) {
        abort();
    }
    same_string(o, "title", l->title);
    same_string(o, "topic", l->topic);
    same_string(o, "description", l->description);
    same_string(o, "levelName", l->level_name);
    same_string(o, "levelCode", l->level_code);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    apr_pool_t *p;
    lessons_input_t in;
    lessons_lesson_t l;
    json_t *errors = NULL, *back;
    const char *detail = NULL;
    apr_array_header_t *list;
    apr_size_t len = 0;
    char *text;

    apr_pool_create(&p, fuzz_root);
    if (lessons_payload_decode(p, (const char *)data, size,
                               LESSONS_PAYLOAD_CREATE, &in, &errors,
                               &detail) == LESSONS_PAYLOAD_OK) {
        memset(&l, 0, sizeof(l));
        l.id = (apr_int64_t)size * 7919;
        l.level_id = in.level_id;
        l.level_name = "Anfänger";
        l.level_code = "A1";
        l.title = in.title;
        l.order = in.order;
        l.topic = in.topic;
        l.description = in.description;
        l.is_active = in.is_active;
        l.version = 1;
        l.epoch = "e";
        text = lessons_json_lesson_text(p, &l, &len);
        if (!text) {
            abort();
        }
        back = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        same_lesson(back, &l);
        json_decref(back);
        list = apr_array_make(p, 1, sizeof(lessons_lesson_t));
        APR_ARRAY_PUSH(list, lessons_lesson_t) = l;
        text = lessons_json_list_text(p, list, &len);
        back = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL)
                    : NULL;
        if (!json_is_array(back) || json_array_size(back) != 1) {
            abort();
        }
        same_lesson(json_array_get(back, 0), &l);
        json_decref(back);
    }
    apr_pool_destroy(p);
    return 0;
}
