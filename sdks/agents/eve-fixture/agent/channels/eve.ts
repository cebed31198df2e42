import { httpBasic } from "eve/channels/auth";
import { eveChannel } from "eve/channels/eve";

export default eveChannel({ auth: [httpBasic({ username: "herald-test", password: process.env.EVE_TEST_PASSWORD ?? "" })] });
