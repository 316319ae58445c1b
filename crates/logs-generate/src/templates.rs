//! The crash types error texts are built from: exception names, messages and the frames
//! of the platform code around the app's own frames.
//!
//! Messages are templates: `$` followed by one of `i j n h a c p m s u k o` is replaced per
//! record (see `crash::expand`); any other `$` is literal.

/// A Java/Kotlin or .NET crash type.
#[derive(Debug)]
pub(crate) struct Crash {
    /// Exception class, used as `error_name`.
    pub name: &'static str,
    pub message: &'static str,
    /// Platform frames above the app's code, where the exception is thrown.
    pub top: &'static [&'static str],
}

/// An iOS crash type.
#[derive(Debug)]
pub(crate) struct AppleCrash {
    pub name: &'static str,
    pub exception_type: &'static str,
    pub reason: &'static str,
    /// (image, symbol + offset) frames above the app's code.
    pub top: &'static [(&'static str, &'static str)],
}

const fn java(name: &'static str, message: &'static str, top: &'static [&'static str]) -> Crash {
    Crash { name, message, top }
}

pub(crate) static JAVA_CRASHES: &[Crash] = &[
    java(
        "java.lang.NullPointerException",
        "Attempt to invoke virtual method 'java.lang.String java.lang.Object.toString()' on a null object reference",
        &[],
    ),
    java(
        "java.lang.NullPointerException",
        "Attempt to invoke interface method 'int java.util.List.size()' on a null object reference",
        &[],
    ),
    java(
        "java.lang.NullPointerException",
        "Attempt to read from field 'android.view.View $p.ui.$c.rootView' on a null object reference",
        &[],
    ),
    java(
        "kotlin.UninitializedPropertyAccessException",
        "lateinit property adapter has not been initialized",
        &[],
    ),
    java(
        "java.lang.IllegalStateException",
        "Fragment $c{$h} (ab$h-2c4e-4f1a-9d3b-$h$h) not attached to a context.",
        &[
            "androidx.fragment.app.Fragment.requireContext(Fragment.java:972)",
            "androidx.fragment.app.Fragment.getResources(Fragment.java:1036)",
        ],
    ),
    java(
        "java.lang.IllegalStateException",
        "Can not perform this action after onSaveInstanceState",
        &[
            "androidx.fragment.app.FragmentManager.checkStateLoss(FragmentManager.java:1715)",
            "androidx.fragment.app.FragmentManager.enqueueAction(FragmentManager.java:1755)",
            "androidx.fragment.app.BackStackRecord.commitInternal(BackStackRecord.java:321)",
        ],
    ),
    java(
        "java.lang.IndexOutOfBoundsException",
        "Index: $j, Size: $i",
        &["java.util.ArrayList.get(ArrayList.java:437)"],
    ),
    java("java.lang.ArrayIndexOutOfBoundsException", "length=$i; index=$j", &[]),
    java(
        "java.lang.NullPointerException",
        "Parameter specified as non-null is null: method $p.data.$c.bind, parameter item",
        &[],
    ),
    java("java.lang.ClassCastException", "java.lang.Integer cannot be cast to java.lang.String", &[]),
    java(
        "java.lang.NumberFormatException",
        "For input string: \"$s\"",
        &["java.lang.Integer.parseInt(Integer.java:797)", "java.lang.Integer.parseInt(Integer.java:915)"],
    ),
    java(
        "java.util.ConcurrentModificationException",
        "",
        &[
            "java.util.ArrayList$Itr.checkForComodification(ArrayList.java:1013)",
            "java.util.ArrayList$Itr.next(ArrayList.java:967)",
        ],
    ),
    java(
        "android.view.WindowManager$BadTokenException",
        "Unable to add window -- token android.os.BinderProxy@$h is not valid; is your activity running?",
        &[
            "android.view.ViewRootImpl.setView(ViewRootImpl.java:1126)",
            "android.view.WindowManagerGlobal.addView(WindowManagerGlobal.java:409)",
            "android.view.WindowManagerImpl.addView(WindowManagerImpl.java:109)",
            "android.app.Dialog.show(Dialog.java:340)",
        ],
    ),
    java(
        "java.lang.OutOfMemoryError",
        "Failed to allocate a $n byte allocation with $n free bytes and $iMB until OOM, target footprint 268435456, growth limit 268435456",
        &[
            "java.util.Arrays.copyOf(Arrays.java:3578)",
            "java.lang.AbstractStringBuilder.ensureCapacityInternal(AbstractStringBuilder.java:120)",
            "android.graphics.BitmapFactory.decodeStream(BitmapFactory.java:713)",
        ],
    ),
    java(
        "android.database.sqlite.SQLiteConstraintException",
        "UNIQUE constraint failed: cart_items.id (code 1555 SQLITE_CONSTRAINT_PRIMARYKEY)",
        &[
            "android.database.sqlite.SQLiteConnection.nativeExecuteForLastInsertedRowId(Native Method)",
            "android.database.sqlite.SQLiteSession.executeForLastInsertedRowId(SQLiteSession.java:790)",
            "androidx.room.EntityInsertionAdapter.insert(EntityInsertionAdapter.kt:51)",
        ],
    ),
    java(
        "java.net.SocketTimeoutException",
        "failed to connect to $o/203.0.113.$j (port 443) from /10.0.$i.$j (port $n) after 10000ms",
        &[
            "libcore.io.IoBridge.connectErrno(IoBridge.java:185)",
            "okhttp3.internal.connection.RealConnection.connectSocket(RealConnection.kt:295)",
        ],
    ),
    java(
        "javax.net.ssl.SSLHandshakeException",
        "java.security.cert.CertPathValidatorException: Trust anchor for certification path not found.",
        &[
            "com.android.org.conscrypt.SSLUtils.toSSLHandshakeException(SSLUtils.java:363)",
            "okhttp3.internal.connection.RealConnection.connectTls(RealConnection.kt:379)",
        ],
    ),
    java(
        "java.net.UnknownHostException",
        "Unable to resolve host \"$o\": No address associated with hostname",
        &[
            "java.net.Inet6AddressImpl.lookupHostByName(Inet6AddressImpl.java:156)",
            "java.net.InetAddress.getAllByName(InetAddress.java:1152)",
            "okhttp3.Dns$Companion$DnsSystem.lookup(Dns.kt:49)",
        ],
    ),
    java(
        "android.content.ActivityNotFoundException",
        "No Activity found to handle Intent { act=android.intent.action.VIEW dat=https://$o/... flg=0x10000000 }",
        &[
            "android.app.Instrumentation.checkStartActivityResult(Instrumentation.java:2239)",
            "android.app.Activity.startActivityForResult(Activity.java:5593)",
        ],
    ),
    java(
        "java.lang.SecurityException",
        "Permission Denial: starting Intent { act=android.media.action.IMAGE_CAPTURE cmp=com.android.camera/.Camera } from ProcessRecord{$h $n:$p/u0a$i} (pid=$n, uid=10$i) with revoked permission android.permission.CAMERA",
        &[
            "android.os.Parcel.createExceptionOrNull(Parcel.java:3011)",
            "android.app.Instrumentation.execStartActivity(Instrumentation.java:1881)",
        ],
    ),
    java(
        "android.os.DeadObjectException",
        "",
        &[
            "android.os.BinderProxy.transactNative(Native Method)",
            "android.os.BinderProxy.transact(BinderProxy.java:584)",
        ],
    ),
    java(
        "java.lang.RuntimeException",
        "Unable to start activity ComponentInfo{$p/$p.ui.$c}: java.lang.IllegalStateException: You need to use a Theme.AppCompat theme (or descendant) with this activity.",
        &[
            "android.app.ActivityThread.performLaunchActivity(ActivityThread.java:3645)",
            "android.app.ActivityThread.handleLaunchActivity(ActivityThread.java:3782)",
        ],
    ),
    java(
        "kotlinx.coroutines.JobCancellationException",
        "Job was cancelled; job=SupervisorJobImpl{Cancelling}@$h",
        &[],
    ),
    java(
        "com.google.gson.JsonSyntaxException",
        "java.lang.IllegalStateException: Expected BEGIN_OBJECT but was STRING at line 1 column 1 path $",
        &[
            "com.google.gson.internal.bind.ReflectiveTypeAdapterFactory$Adapter.read(ReflectiveTypeAdapterFactory.java:226)",
            "com.google.gson.Gson.fromJson(Gson.java:932)",
        ],
    ),
    java(
        "org.json.JSONException",
        "Value <!DOCTYPE of type java.lang.String cannot be converted to JSONObject",
        &["org.json.JSON.typeMismatch(JSON.java:112)", "org.json.JSONObject.<init>(JSONObject.java:172)"],
    ),
    java(
        "android.app.ForegroundServiceDidNotStartInTimeException",
        "Context.startForegroundService() did not then call Service.startForeground(): ServiceRecord{$h u0 $p/.player.PlaybackService}",
        &[
            "android.app.ActivityThread.throwRemoteServiceException(ActivityThread.java:2024)",
            "android.app.ActivityThread.access$2800(ActivityThread.java:257)",
        ],
    ),
    java(
        "java.lang.UnsatisfiedLinkError",
        "dlopen failed: library \"libnative-lib.so\" not found",
        &[
            "java.lang.Runtime.loadLibrary0(Runtime.java:1077)",
            "java.lang.System.loadLibrary(System.java:1667)",
        ],
    ),
    java(
        "android.view.ViewRootImpl$CalledFromWrongThreadException",
        "Only the original thread that created a view hierarchy can touch its views.",
        &[
            "android.view.ViewRootImpl.checkThread(ViewRootImpl.java:10446)",
            "android.view.ViewRootImpl.requestLayout(ViewRootImpl.java:2063)",
            "android.view.View.requestLayout(View.java:26364)",
        ],
    ),
    java(
        "java.io.FileNotFoundException",
        "/data/user/0/$p/files/cache/$h.tmp: open failed: ENOENT (No such file or directory)",
        &[
            "libcore.io.IoBridge.open(IoBridge.java:574)",
            "java.io.FileInputStream.<init>(FileInputStream.java:160)",
        ],
    ),
    java(
        "androidx.fragment.app.Fragment$InstantiationException",
        "Unable to instantiate fragment $p.ui.$c: could not find Fragment constructor",
        &[
            "androidx.fragment.app.Fragment.instantiate(Fragment.java:631)",
            "androidx.fragment.app.FragmentContainer.instantiate(FragmentContainer.java:57)",
        ],
    ),
    java(
        "java.lang.IllegalArgumentException",
        "View=DecorView@$h[$c] not attached to window manager",
        &[
            "android.view.WindowManagerGlobal.findViewLocked(WindowManagerGlobal.java:544)",
            "android.view.WindowManagerGlobal.removeView(WindowManagerGlobal.java:448)",
            "android.app.Dialog.dismissDialog(Dialog.java:387)",
        ],
    ),
    java(
        "android.database.CursorWindowAllocationException",
        "Cursor window allocation of 2048 kb failed. # Open Cursors=$j (# cursors opened by this proc=$j)",
        &[
            "android.database.CursorWindow.<init>(CursorWindow.java:140)",
            "android.database.AbstractWindowedCursor.clearOrCreateWindow(AbstractWindowedCursor.java:198)",
        ],
    ),
    java("java.lang.StackOverflowError", "stack size 8192KB", &[]),
    java(
        "retrofit2.HttpException",
        "HTTP $k ",
        &[
            "retrofit2.KotlinExtensions$await$2$2.onResponse(KotlinExtensions.kt:53)",
            "retrofit2.OkHttpCall$1.onResponse(OkHttpCall.java:161)",
        ],
    ),
];

const LOOPER: [&str; 8] = [
    "android.os.Handler.handleCallback(Handler.java:942)",
    "android.os.Handler.dispatchMessage(Handler.java:99)",
    "android.os.Looper.loopOnce(Looper.java:201)",
    "android.os.Looper.loop(Looper.java:288)",
    "android.app.ActivityThread.main(ActivityThread.java:7918)",
    "java.lang.reflect.Method.invoke(Native Method)",
    "com.android.internal.os.RuntimeInit$MethodAndArgsCaller.run(RuntimeInit.java:548)",
    "com.android.internal.os.ZygoteInit.main(ZygoteInit.java:936)",
];

/// Frames below the app's code: how the app code was called.
pub(crate) static JAVA_TAILS: &[&[&str]] = &[
    &LOOPER,
    &[
        "kotlin.coroutines.jvm.internal.BaseContinuationImpl.resumeWith(ContinuationImpl.kt:33)",
        "kotlinx.coroutines.DispatchedTask.run(DispatchedTask.kt:108)",
        "kotlinx.coroutines.internal.LimitedDispatcher$Worker.run(LimitedDispatcher.kt:115)",
        "kotlinx.coroutines.scheduling.TaskImpl.run(Tasks.kt:103)",
        "kotlinx.coroutines.scheduling.CoroutineScheduler.runSafely(CoroutineScheduler.kt:584)",
        "kotlinx.coroutines.scheduling.CoroutineScheduler$Worker.executeTask(CoroutineScheduler.kt:793)",
        "kotlinx.coroutines.scheduling.CoroutineScheduler$Worker.runWorker(CoroutineScheduler.kt:697)",
        "kotlinx.coroutines.scheduling.CoroutineScheduler$Worker.run(CoroutineScheduler.kt:684)",
    ],
    &[
        "java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1145)",
        "java.util.concurrent.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:644)",
        "java.lang.Thread.run(Thread.java:1012)",
    ],
    &[
        "androidx.recyclerview.widget.RecyclerView$Adapter.onBindViewHolder(RecyclerView.java:7254)",
        "androidx.recyclerview.widget.RecyclerView$Adapter.bindViewHolder(RecyclerView.java:7337)",
        "androidx.recyclerview.widget.RecyclerView$Recycler.tryBindViewHolderByDeadline(RecyclerView.java:6194)",
        "androidx.recyclerview.widget.RecyclerView$Recycler.tryGetViewHolderForPositionByDeadline(RecyclerView.java:6427)",
        "androidx.recyclerview.widget.GapWorker.prefetchPositionWithDeadline(GapWorker.java:288)",
        "androidx.recyclerview.widget.GapWorker.run(GapWorker.java:366)",
        LOOPER[0],
        LOOPER[1],
        LOOPER[2],
        LOOPER[3],
        LOOPER[4],
        LOOPER[5],
        LOOPER[6],
        LOOPER[7],
    ],
    &[
        "android.app.Activity.performCreate(Activity.java:8342)",
        "android.app.Instrumentation.callActivityOnCreate(Instrumentation.java:1417)",
        "android.app.ActivityThread.performLaunchActivity(ActivityThread.java:3625)",
        "android.app.ActivityThread.handleLaunchActivity(ActivityThread.java:3782)",
        "android.app.servertransaction.LaunchActivityItem.execute(LaunchActivityItem.java:101)",
        "android.app.servertransaction.TransactionExecutor.executeCallbacks(TransactionExecutor.java:135)",
        "android.app.ActivityThread$H.handleMessage(ActivityThread.java:2307)",
        LOOPER[1],
        LOOPER[2],
        LOOPER[3],
        LOOPER[4],
        LOOPER[5],
        LOOPER[6],
        LOOPER[7],
    ],
    &[
        "io.reactivex.internal.operators.observable.ObservableObserveOn$ObserveOnObserver.run(ObservableObserveOn.java:201)",
        "io.reactivex.android.schedulers.HandlerScheduler$ScheduledRunnable.run(HandlerScheduler.java:124)",
        LOOPER[0],
        LOOPER[1],
        LOOPER[2],
        LOOPER[3],
        LOOPER[4],
    ],
];

const fn apple(
    name: &'static str,
    exception_type: &'static str,
    reason: &'static str,
    top: &'static [(&'static str, &'static str)],
) -> AppleCrash {
    AppleCrash { name, exception_type, reason, top }
}

const OBJC_THROW: [(&str, &str); 2] =
    [("CoreFoundation", "__exceptionPreprocess + 164"), ("libobjc.A.dylib", "objc_exception_throw + 60")];
const SWIFT_FAIL: [(&str, &str); 1] =
    [("libswiftCore.dylib", "_assertionFailure(_:_:file:line:flags:) + 264")];
const ABORT: [(&str, &str); 3] = [
    ("libsystem_kernel.dylib", "__pthread_kill + 8"),
    ("libsystem_pthread.dylib", "pthread_kill + 268"),
    ("libsystem_c.dylib", "abort + 180"),
];

pub(crate) static APPLE_CRASHES: &[AppleCrash] = &[
    apple(
        "NSInvalidArgumentException",
        "EXC_CRASH (SIGABRT)",
        "-[__NSCFString objectForKey:]: unrecognized selector sent to instance $a",
        &[
            OBJC_THROW[0],
            OBJC_THROW[1],
            ("CoreFoundation", "-[NSObject(NSObject) doesNotRecognizeSelector:] + 140"),
            ("CoreFoundation", "___forwarding___ + 1568"),
            ("CoreFoundation", "_CF_forwarding_prep_0 + 96"),
        ],
    ),
    apple(
        "NSInvalidArgumentException",
        "EXC_CRASH (SIGABRT)",
        "*** -[__NSPlaceholderDictionary initWithObjects:forKeys:count:]: attempt to insert nil object from objects[$i]",
        &[
            OBJC_THROW[0],
            OBJC_THROW[1],
            ("CoreFoundation", "-[__NSPlaceholderDictionary initWithObjects:forKeys:count:] + 712"),
        ],
    ),
    apple(
        "NSRangeException",
        "EXC_CRASH (SIGABRT)",
        "*** -[__NSArrayM objectAtIndex:]: index $j beyond bounds [0 .. $i]",
        &[OBJC_THROW[0], OBJC_THROW[1], ("CoreFoundation", "-[__NSArrayM objectAtIndexedSubscript:] + 240")],
    ),
    apple(
        "NSInternalInconsistencyException",
        "EXC_CRASH (SIGABRT)",
        "Invalid update: invalid number of rows in section 0. The number of rows contained in an existing section after the update ($j) must be equal to the number of rows contained in that section before the update ($i), plus or minus the number of rows inserted or deleted from that section (0 inserted, 1 deleted).",
        &[
            OBJC_THROW[0],
            OBJC_THROW[1],
            ("Foundation", "_userInfoForFileAndLine + 0"),
            ("UIKitCore", "-[UITableView _endCellAnimationsWithContext:] + 10776"),
        ],
    ),
    apple(
        "NSGenericException",
        "EXC_CRASH (SIGABRT)",
        "*** Collection <__NSArrayM: $a> was mutated while being enumerated.",
        &[OBJC_THROW[0], OBJC_THROW[1], ("CoreFoundation", "-[__NSSingleObjectEnumerator init] + 0")],
    ),
    apple(
        "NSUnknownKeyException",
        "EXC_CRASH (SIGABRT)",
        "[<$m.$c $a> setValue:forUndefinedKey:]: this class is not key value coding-compliant for the key \"titleLabel\".",
        &[
            OBJC_THROW[0],
            OBJC_THROW[1],
            ("Foundation", "-[NSObject(NSKeyValueCoding) setValue:forUndefinedKey:] + 272"),
        ],
    ),
    apple(
        "EXC_BAD_ACCESS",
        "EXC_BAD_ACCESS (SIGSEGV)",
        "KERN_INVALID_ADDRESS at $a",
        &[("libobjc.A.dylib", "objc_msgSend + 32")],
    ),
    apple(
        "EXC_BAD_ACCESS",
        "EXC_BAD_ACCESS (SIGBUS)",
        "KERN_PROTECTION_FAILURE at $a",
        &[("libswiftCore.dylib", "swift_retain + 24")],
    ),
    apple(
        "EXC_BREAKPOINT",
        "EXC_BREAKPOINT (SIGTRAP)",
        "Fatal error: Unexpectedly found nil while unwrapping an Optional value",
        &SWIFT_FAIL,
    ),
    apple(
        "EXC_BREAKPOINT",
        "EXC_BREAKPOINT (SIGTRAP)",
        "Fatal error: Index out of range",
        &[SWIFT_FAIL[0], ("libswiftCore.dylib", "Array.subscript.getter + 88")],
    ),
    apple(
        "EXC_BREAKPOINT",
        "EXC_BREAKPOINT (SIGTRAP)",
        "Fatal error: Unexpectedly found nil while implicitly unwrapping an Optional value",
        &SWIFT_FAIL,
    ),
    apple(
        "SIGABRT",
        "EXC_CRASH (SIGABRT)",
        "Fatal error: Attempted to read an unowned reference but object $a was already deallocated",
        &[
            ABORT[0],
            ABORT[1],
            ABORT[2],
            ("libswiftCore.dylib", "swift::fatalError(unsigned int, char const*, ...) + 28"),
        ],
    ),
    apple(
        "SIGKILL",
        "EXC_CRASH (SIGKILL)",
        "FRONTBOARD 0x8badf00d, scene-update watchdog transgression: application<$m>:$n exhausted real (wall clock) time allowance of 10.00 seconds",
        &[
            ("libsystem_kernel.dylib", "mach_msg2_trap + 8"),
            ("libsystem_kernel.dylib", "mach_msg2_internal + 80"),
        ],
    ),
    apple(
        "Swift.DecodingError",
        "EXC_BREAKPOINT (SIGTRAP)",
        "keyNotFound(CodingKeys(stringValue: \"id\", intValue: nil), Swift.DecodingError.Context(codingPath: [], debugDescription: \"No value associated with key CodingKeys(stringValue: \\\"id\\\", intValue: nil) (\\\"id\\\").\", underlyingError: nil))",
        &[SWIFT_FAIL[0], ("libswiftCore.dylib", "swift_unexpectedError + 588")],
    ),
    apple("SIGABRT", "EXC_CRASH (SIGABRT)", "abort() called", &ABORT),
];

const MAIN_RUNLOOP: [(&str, &str); 10] = [
    ("libdispatch.dylib", "_dispatch_call_block_and_release + 32"),
    ("libdispatch.dylib", "_dispatch_client_callout + 20"),
    ("libdispatch.dylib", "_dispatch_main_queue_drain + 984"),
    ("libdispatch.dylib", "_dispatch_main_queue_callback_4CF + 44"),
    ("CoreFoundation", "__CFRUNLOOP_IS_SERVICING_THE_MAIN_DISPATCH_QUEUE__ + 16"),
    ("CoreFoundation", "__CFRunLoopRun + 1996"),
    ("CoreFoundation", "CFRunLoopRunSpecific + 572"),
    ("GraphicsServices", "GSEventRunModal + 164"),
    ("UIKitCore", "-[UIApplication _run] + 816"),
    ("UIKitCore", "UIApplicationMain + 340"),
];

/// Frames below the app's code; an empty image is the app's own binary.
pub(crate) static APPLE_TAILS: &[&[(&str, &str)]] = &[
    &[
        MAIN_RUNLOOP[0],
        MAIN_RUNLOOP[1],
        MAIN_RUNLOOP[2],
        MAIN_RUNLOOP[3],
        MAIN_RUNLOOP[4],
        MAIN_RUNLOOP[5],
        MAIN_RUNLOOP[6],
        MAIN_RUNLOOP[7],
        MAIN_RUNLOOP[8],
        MAIN_RUNLOOP[9],
        ("", "main + 64"),
        ("dyld", "start + 2240"),
    ],
    &[
        ("UIKitCore", "-[UIControl sendAction:to:forEvent:] + 100"),
        ("UIKitCore", "-[UIControl _sendActionsForEvents:withEvent:] + 112"),
        ("UIKitCore", "-[UIButton _sendActionsForEvents:withEvent:] + 120"),
        ("UIKitCore", "-[UIWindow sendEvent:] + 3216"),
        ("UIKitCore", "-[UIApplication sendEvent:] + 376"),
        MAIN_RUNLOOP[5],
        MAIN_RUNLOOP[6],
        MAIN_RUNLOOP[7],
        MAIN_RUNLOOP[8],
        MAIN_RUNLOOP[9],
        ("", "main + 64"),
        ("dyld", "start + 2240"),
    ],
    &[
        ("libdispatch.dylib", "_dispatch_call_block_and_release + 32"),
        ("libdispatch.dylib", "_dispatch_client_callout + 20"),
        ("libdispatch.dylib", "_dispatch_lane_serial_drain + 668"),
        ("libdispatch.dylib", "_dispatch_lane_invoke + 384"),
        ("libdispatch.dylib", "_dispatch_workloop_worker_thread + 648"),
        ("libsystem_pthread.dylib", "_pthread_wqthread + 288"),
        ("libsystem_pthread.dylib", "start_wqthread + 8"),
    ],
];

pub(crate) static DOTNET_CRASHES: &[Crash] = &[
    java("System.NullReferenceException", "Object reference not set to an instance of an object.", &[]),
    java(
        "System.InvalidOperationException",
        "Collection was modified; enumeration operation may not execute.",
        &["System.Collections.Generic.List`1.Enumerator.MoveNext()"],
    ),
    java(
        "System.IO.FileNotFoundException",
        "Could not find file 'C:\\Users\\user\\AppData\\Local\\Packages\\$m_$h\\LocalState\\cache_$h.json'.",
        &[
            "Microsoft.Win32.SafeHandles.SafeFileHandle.CreateFile(String fullPath, FileMode mode, FileAccess access, FileShare share, FileOptions options)",
            "System.IO.FileStream..ctor(String path, FileMode mode, FileAccess access, FileShare share)",
        ],
    ),
    java(
        "System.UnauthorizedAccessException",
        "Access to the path 'C:\\ProgramData\\$m\\settings.dat' is denied.",
        &["System.IO.FileSystem.DeleteFile(String fullPath)"],
    ),
    java(
        "System.Net.Http.HttpRequestException",
        "Response status code does not indicate success: $k (Bad Gateway).",
        &[
            "System.Net.Http.HttpResponseMessage.EnsureSuccessStatusCode()",
            "System.Net.Http.HttpClient.GetStringAsyncCore(HttpRequestMessage request, CancellationToken cancellationToken)",
        ],
    ),
    java(
        "System.ArgumentOutOfRangeException",
        "Index was out of range. Must be non-negative and less than the size of the collection. (Parameter 'index')",
        &["System.Collections.Generic.List`1.get_Item(Int32 index)"],
    ),
    java(
        "System.Runtime.InteropServices.COMException",
        "Error HRESULT E_FAIL has been returned from a call to a COM component. (0x80004005)",
        &[
            "WinRT.ExceptionHelpers.<ThrowExceptionForHR>g__Throw|39_0(Int32 hr)",
            "ABI.Microsoft.UI.Xaml.IUIElementMethods.Measure(IObjectReference _obj, Size availableSize)",
        ],
    ),
    java(
        "System.Text.Json.JsonException",
        "The JSON value could not be converted to System.Int32. Path: $.items[$i].price | LineNumber: 0 | BytePositionInLine: $n.",
        &[
            "System.Text.Json.ThrowHelper.ReThrowWithPath(ReadStack& state, Utf8JsonReader& reader, Exception ex)",
            "System.Text.Json.JsonSerializer.Deserialize[TValue](String json, JsonSerializerOptions options)",
        ],
    ),
];

pub(crate) static DOTNET_TAILS: &[&[&str]] = &[
    &[
        "System.Runtime.CompilerServices.AsyncMethodBuilderCore.<>c.<ThrowAsync>b__7_0(Object state)",
        "Microsoft.UI.Dispatching.DispatcherQueueSynchronizationContext.<>c__DisplayClass2_0.<Post>b__0()",
    ],
    &[
        "System.Threading.ExecutionContext.RunInternal(ExecutionContext executionContext, ContextCallback callback, Object state)",
        "System.Threading.Tasks.Task.ExecuteWithThreadLocal(Task& currentTaskSlot, Thread threadPoolThread)",
        "System.Threading.ThreadPoolWorkQueue.Dispatch()",
        "System.Threading.PortableThreadPool.WorkerThread.WorkerThreadStart()",
    ],
];

/// Messages of custom (non-crash) errors the apps report.
pub(crate) static CUSTOM_MESSAGES: &[&str] = &[
    "HTTP $k on POST https://$o/v2/orders, request_id=\"$h$h\", attempt=$i",
    "unexpected response body: expected \"items\" array, got null (offset=$i, limit=$j)",
    "timeout after $n ms while waiting for \"payment_confirmation\", state=PENDING",
    "invalid token: \"exp\" claim is in the past, skew=$i s, kid=\"$h\"",
    "file \"/cache/img_$h.webp\" is corrupted: crc mismatch, expected 0x$h, got 0x$h",
    "user cancelled the flow at step \"$c\", reason=\"back_pressed\"",
    "database write failed: UNIQUE constraint failed: cart_items.id, rows=$i",
    "location unavailable: provider=\"fused\", accuracy=$j m, age=$n ms",
    "push token mismatch: local=\"$h$h\", server=\"$h$h\"",
    "deeplink \"https://$o/p/$n?ref=push&utm_source=email,sms\" could not be resolved",
    "search index out of date: version $i, expected $j; rebuilding\tin background",
    "purchase rejected by store: code=$k, sku=\"premium_monthly\", message=\"Item unavailable, try later\"",
];

/// Inputs that fail to parse as numbers (`For input string: "..."`).
pub(crate) static BAD_INPUTS: &[&str] =
    &["12,5", "null", "", "NaN", "1 234", "0x1F", "−3", "9223372036854775808", "\"42\""];

pub(crate) static HTTP_CODES: &[u32] = &[500, 502, 503, 504, 429, 401, 403, 404, 400];
