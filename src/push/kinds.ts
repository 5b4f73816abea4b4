/**
 * The kinds of push token an installation registers (docs/api.md "API": `kind`), and iOS's environments.
 * `iosVoip` rings (PushKit); `iosAlert` is the same app's regular APNs device token, used only for
 * the missed-call alert (docs/protocol.md "Missed-call alerts"); `androidPush` does both.
 */
export const PUSH_TOKEN_KINDS = ['iosVoip', 'androidPush', 'iosAlert'] as const;
export type PushTokenKind = (typeof PUSH_TOKEN_KINDS)[number];

/** The kinds that are APNs device tokens: hexadecimal, with an `iosEnvironment`, sent to APNs. */
export const isIosKind = (kind: PushTokenKind | string): kind is 'iosVoip' | 'iosAlert' => kind === 'iosVoip' || kind === 'iosAlert';

/** Which APNs origin an iOS token belongs to. */
export const IOS_ENVIRONMENTS = ['production', 'development'] as const;
export type IosEnvironment = (typeof IOS_ENVIRONMENTS)[number];
