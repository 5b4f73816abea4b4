/**
 * A provider credential (APNs provider JWT, FCM access token) kept while it is fresh. Concurrent
 * callers at refresh time share one refresh, so the provider sees one new credential; and a
 * credential the provider refused is dropped only if it is still the current one, so many
 * in-flight requests refused together cause one refresh, not one each.
 */
export class CachedCredential<T extends { value: string }> {
  private current: T | undefined;
  private refreshing: Promise<T> | undefined;

  constructor(
    private readonly make: () => Promise<T>,
    private readonly isFresh: (credential: T) => boolean,
  ) {}

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

  /** Forgets the credential the provider refused (or, with none given, whatever is cached). */
  invalidate(rejected?: string): void {
    if (rejected !== undefined && this.current?.value !== rejected) return;
    this.current = undefined;
  }
}
