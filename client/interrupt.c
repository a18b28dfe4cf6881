/*
 * Interrupting the waits of a handle from another thread (shms_interrupt, shmsched.h): what
 * lets `shmsched submit --wait` and `worker` sleep until something concerns them, a stop
 * signal taken by a thread of their own included, instead of waking in slices to look.
 */
#include <ck_pr.h>
#include <pthread.h>

#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/futex.h"
#include "client.h"

int shms__interrupted(struct shms *h) { return shms__load_32(&h->interrupted) != 0; }

/*
 * A sleeper is on the handle's list from before it looks at the flag until after it wakes. The
 * interrupter sets the flag, then clears each listed sleeper's sleeping bit and wakes its futex:
 * a sleeper that looked at the flag before it was set either sleeps already (woken) or is about
 * to sleep on a word that now differs from the value it expects (the futex returns at once). One
 * listed after the interrupter's pass sees the flag: the list's lock orders the two.
 */
int shms__sleeper_add(struct shms *h, struct shms__sleeper *s) {
  pthread_mutex_lock(&h->sleepers_lock);
  s->next = h->sleepers;
  h->sleepers = s;
  pthread_mutex_unlock(&h->sleepers_lock);
  if (!shms__interrupted(h))
    return 0;
  shms__sleeper_remove(h, s);
  return 1;
}

void shms__sleeper_remove(struct shms *h, struct shms__sleeper *s) {
  pthread_mutex_lock(&h->sleepers_lock);
  struct shms__sleeper **at = &h->sleepers;
  while (*at != NULL && *at != s)
    at = &(*at)->next;
  if (*at != NULL)
    *at = s->next;
  pthread_mutex_unlock(&h->sleepers_lock);
}

/* Clear the sleeping bit a sleeper set (another party may change the word meanwhile: CAS until
 * the bit is gone), then wake the futex. The bit only asks wakers to wake: a waiter that finds it
 * cleared sets it again before it sleeps. */
static void wake(const struct shms__sleeper *s) {
  if (s->word64 != NULL) {
    uint64_t w = shms__load_64(s->word64);
    while ((w & s->bit) && !ck_pr_cas_64_value(s->word64, w, w & ~s->bit, &w))
      ;
    shms__futex_wake((uint32_t *)s->word64); /* the low half (x86-64 is little-endian) */
  } else {
    uint32_t w = shms__load_32(s->word32);
    while ((w & (uint32_t)s->bit) && !ck_pr_cas_32_value(s->word32, w, w & ~(uint32_t)s->bit, &w))
      ;
    shms__futex_wake(s->word32);
  }
}

int shms_interrupt(shms_t *h, int on) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (!on) {
    shms__store_32(&h->interrupted, 0);
    return SHMS_OK;
  }
  ck_pr_fas_32(&h->interrupted, 1); /* locked: set before the list is read */
  pthread_mutex_lock(&h->sleepers_lock);
  for (struct shms__sleeper *s = h->sleepers; s != NULL; s = s->next)
    wake(s);
  pthread_mutex_unlock(&h->sleepers_lock);
  return SHMS_OK;
}
