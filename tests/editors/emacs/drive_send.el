;;; drive_send.el --- Emacs + eglot driver for tests/editors/emacs/test_emacs_send.py  -*- lexical-binding: t -*-

;; Run as `emacs -Q --batch -l drive_send.el' with DSH_EDITOR_SPEC naming a JSON file: config (the
;; eglot block and the send snippet of docs/editors.md, pointed at the test's store and dsh web),
;; file, result, timeout_ms.  drive.el's helpers, then: `M-x eglot', the prompt's model-facing text
;; asked for as the server serves it, and `C-c d s' (`dsh-session-reference-send') typed.

(defvar dsh-driver
  (lambda ()
    (find-file (dsh-spec 'file))
    (dsh-keys "M-x eglot RET")
    (dsh-wait "eglot to manage the prompt" (lambda () (bound-and-true-p eglot--managed-mode)))
    (let ((uri (plist-get (eglot--TextDocumentIdentifier) :uri)))
      (dsh-record 'model_text
                  (plist-get (jsonrpc-request (eglot--current-server-or-lose) :workspace/executeCommand
                                              `(:command "dshSessionReference.modelText" :arguments [,uri]))
                             :text)))
    (setq dsh-step "C-c d s")
    (advice-add 'dsh-session-reference-send :filter-return
                (lambda (sent) (dsh-record 'sent (plist-get sent :message)) sent))
    (advice-add 'message :before
                (lambda (format-string &rest args)
                  (when (and format-string (equal format-string "%s"))
                    (dsh-record 'echoed (apply #'format format-string args)))))
    (dsh-keys "C-c d s")
    (dsh-wait "the send's message" (lambda () (alist-get 'echoed dsh-result)))
    (eglot-shutdown (eglot-current-server))
    (dsh-finish nil)))

(load (expand-file-name "drive.el" (file-name-directory load-file-name)) nil t t)
