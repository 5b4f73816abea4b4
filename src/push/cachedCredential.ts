/**
 * A provider credential (APNs provider JWT, FCM access token) kept while it is fresh. Concurrent
 * callers at refresh time share one refresh, so the provider sees one new credential; and a
 * credential the provider refused is dropped only if it is still the current one, so many
 * in-flight requests refused together cause one refresh, not one each.
 */
export abstract class CachedCredential<T extends { value: string }> {
  private current: T | undefined;
  private refreshing: Promise<T> | undefined;

  /** Makes a new credential (signs a JWT, exchanges an assertion). */
  protected abstract make(): Promise<T>;
  protected abstract isFresh(credential: T): boolean;

  /** The credential to send now: the cached one while it is fresh. */
  async get(): Promise<string> {
    const cached = this.current;
    if (cached && this.isFresh(cached)) return cached.value;
    this.refreshing ??= this.make()
      .then((made) => (this.current = made))
      .finally(() => {
        this.refreshing = undefined;
      });
    return (await this.refreshing).value;
  }

  /**
   * Forgets the credential the provider refused (or, with none given, whatever is cached). Pass
   * the refused one: when many requests in flight are refused together, only the first replaces
   * it (APNs answers TooManyProviderTokenUpdates to a token per request).
   */
  invalidate(rejected?: string): void {
    if (rejected !== undefined && this.current?.value !== rejected) return;
    this.current = undefined;
  }
}
