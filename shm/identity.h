/*
 * Who the caller is, and what that lets it do (docs/security.md): tenant bindings and identity
 * entries of allow lists, and the segment's admin rights. Every answer comes from the calling
 * process's credentials as the kernel holds them now (geteuid, getgid, getgroups), never from
 * the segment: these are rules among processes that trust each other, which a setgid front end
 * (shmsched installed setgid) turns into a boundary for users who do not.
 */
#ifndef SHMS_SHM_IDENTITY_H
#define SHMS_SHM_IDENTITY_H

#include <sys/types.h>

#include "shmsched.h"

struct shms;

/*
 * 1 if the calling process is in group g: its real gid or a supplementary group, or its
 * effective gid unless it runs in secure mode (a setgid program's borrowed group makes nobody a
 * member of anything).
 */
int shms__cred_in_group(gid_t g);

/*
 * SHMS_OK if the caller may administer h's segment: root, the owner of the segment file (fstat
 * now), or a member of the segment's admin-group. Else SHMS_EPERM with a detail that says who
 * may do `what` (a format: "drain the segment").
 */
int shms__admin_check(const struct shms *h, const char *what, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * SHMS_OK if the caller may queue for tenant in class k (named cn): its tenant binding and the
 * identity entries ("@GROUP", "~USER") of its allow list. Else SHMS_EPERM with a detail naming
 * the rule it broke. Costs nothing in a class with neither.
 */
int shms__identity_check(const shms_class_config *k, const char *cn, const char *tenant);

/* 1 if allow-list entry e names an identity ("@GROUP" or "~USER") rather than a tenant. */
static inline int shms__allow_is_identity(const char *e) { return e[0] == '@' || e[0] == '~'; }

#endif
