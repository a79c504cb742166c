/* Licensed under the Apache License, Version 2.0.
 *
 * lessons_lesson.h: the lesson record as the API speaks of it, the
 * decoded client payload, and the limits both share.  Plain data only,
 * so every unit can include it without pulling in its neighbours.
 */
#ifndef LESSONS_LESSON_H
#define LESSONS_LESSON_H

#include "apr.h"                /* apr_int64_t */

/* Field limits, counted in characters (Unicode code points). */
#define LESSONS_TITLE_MAX        200
#define LESSONS_TOPIC_MAX        100
#define LESSONS_DESCRIPTION_MAX  4000

/* One lesson joined with its level: a row of the API's LessonDto.  Ids
 * are 64-bit end to end (SQLite rowids, PostgreSQL BIGINT); levels stay
 * int.
 */
typedef struct {
    apr_int64_t id;
    int level_id;
    const char *level_name;
    const char *level_code;
    const char *title;
    int order;
    const char *topic;
    const char *description;
    int is_active;
    apr_int64_t version;            /* moves on every change of the row */
    const char *epoch;              /* the database's identity */
} lessons_lesson_t;

/* A create or update payload after decoding.  has_* says whether the
 * client sent the field; for create, the decoder fills in defaults for
 * the optional ones and sets their has_* too.
 */
typedef struct {
    unsigned int has_level_id:1;
    unsigned int has_title:1;
    unsigned int has_order:1;
    unsigned int has_topic:1;
    unsigned int has_description:1;
    unsigned int has_is_active:1;
    int level_id;
    const char *title;
    int order;
    const char *topic;
    const char *description;
    int is_active;
} lessons_input_t;

#endif /* LESSONS_LESSON_H */
